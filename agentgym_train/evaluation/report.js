// Filters of the transcript list: each <select data-filter="NAME"> keeps the episodes whose
// data-NAME attribute equals its value ("" keeps all; "!x" keeps those not equal to x).
(function () {
  "use strict";
  var selects = Array.prototype.slice.call(document.querySelectorAll("select[data-filter]"));
  var episodes = Array.prototype.slice.call(document.querySelectorAll("section.episode"));
  var shown = document.getElementById("shown");

  function keeps(episode, select) {
    var wanted = select.value;
    if (wanted === "") return true;
    var value = episode.getAttribute("data-" + select.getAttribute("data-filter"));
    return wanted.charAt(0) === "!" ? value !== wanted.slice(1) : value === wanted;
  }

  function apply() {
    var count = 0;
    episodes.forEach(function (episode) {
      var visible = selects.every(function (select) { return keeps(episode, select); });
      episode.hidden = !visible;
      if (visible) count += 1;
    });
    if (shown) shown.textContent = String(count);
  }

  selects.forEach(function (select) { select.addEventListener("change", apply); });
  apply();
})();
