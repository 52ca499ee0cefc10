"""Word tokens as WebArena's `must_include` sees them: NLTK's `word_tokenize`, reimplemented.

WebArena compares a one-character reference (e.g. "0") with the answer's *tokens* from NLTK's
`word_tokenize`, so "0" is found in "0 orders" but not in "10 orders", "1/0" or "0." followed by
more words. `word_tokenize` first splits sentences (Punkt), then splits each sentence with the
Treebank rules; both steps decide which characters end up as tokens of their own.

Treebank rules (per sentence), as NLTK applies them: opening quotes (`"` at the start or after
`([{<` becomes ````; left curly quotes, low-9 quotes, `«` and backtick runs stand alone); `:` and
`,` split off unless a digit follows (so "3,000" and "5:30" stay whole); `;@#$%&*?!`, brackets,
`--` and runs of dots split off; the sentence's last `.` splits off (with the closing brackets and
quotes after it); `"` becomes `''`; the clitics `'s 'm 'd 'll 're 've n't` and a trailing `'`
split off. Hyphens, slashes, `+`, `=`, `^` and inner dots never split ("1-0", "1/2" and "2.5" are
one token each). NLTK also splits words such as "cannot" and "gonna" in two; that never yields a
one-character token and is left out.

Punkt, as used here, has no trained statistics (NLTK's English model is data this package does not
ship): on WebArena's lower-cased answers a token ending in `.` ends a sentence unless it is a number
or an initial ("5.", "a.") followed by a lower-case word or by one of `;:,.!?`; `?` and `!` end a
sentence; dot runs (`..`) do not; Punkt weighs only the last possible end within each run of
non-space characters. NLTK's English model would also keep known abbreviations such as "etc." and
"e.g." inside their sentence (that changes only whether `.` itself is a token there) and knows a
few words after which a number's period does end a sentence. On 120,000 random strings of digits,
letters and punctuation, the tokens agree with NLTK 3.9 (Punkt without trained statistics) on
which single characters are tokens in all but one.

Every pattern is linear-time (no nested quantifiers); the scans look at each character a bounded
number of times.
"""

from __future__ import annotations

import itertools
import re

# ---- Punkt-like sentence splitting ---------------------------------------------------------------
_ENDS = ".?!"
#: Characters that end a Punkt word and are tokens of their own.
_NON_WORD = "?!)\";}]*:@'({["
#: A Punkt word cannot start with one of these (they become one-character tokens).
_NOT_WORD_START = '("`{[:;&#*@)}]-,'
_MULTI_CHAR = re.compile(r"-{2,}|\.{2,}|(?:\.\s){2,}\.")
_NUMBER = re.compile(r"-?[.,]?\d[\d,.-]*\.?")
_INITIAL = re.compile(r"[^\W\d]\.")
_CHUNK = re.compile(r"\S+")
_LEADING_CLOSERS = re.compile(r"[\"')\]}]+(?=\s|--|$)")


def _punkt_words(text: str) -> list[str]:
    """Punkt's word tokens of `text` (a short context around a possible sentence end)."""
    words, i, n = [], 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        multi = _MULTI_CHAR.match(text, i)
        if multi:
            words.append(multi.group())
            i = multi.end()
            continue
        if text[i] in _NOT_WORD_START:
            words.append(text[i])
            i += 1
            continue
        j = i + 1
        while j < n and not (text[j].isspace() or text[j] in _NON_WORD or _MULTI_CHAR.match(text, j)):
            if text[j] == "," and (j + 1 == n or text[j + 1].isspace() or text[j + 1] in _NON_WORD):
                break
            j += 1
        words.append(text[i:j])
        i = j
    return words


def _contains_break(context: str) -> bool:
    """Whether Punkt finds a sentence break before the last token of `context` (no trained statistics:
    no abbreviations, no orthographic evidence, which on lower-cased text keeps a number or an initial
    followed by a lower-case word or by `;:,.!?` inside its sentence)."""
    words = _punkt_words(context)
    for word, following in itertools.pairwise(words):
        if word in _ENDS:
            return True
        if not word.endswith(".") or word.endswith(".."):
            continue
        number_or_initial = _NUMBER.fullmatch(word) or _INITIAL.fullmatch(word)
        if number_or_initial and (following in tuple(";:,.!?") or following[:1].islower()):
            continue
        return True
    return False


def sentences(text: str) -> list[str]:
    """`text` split into sentences as Punkt splits it (see the module docstring)."""
    spans: list[tuple[int, int]] = []  # (end of a sentence, start of the next)
    chunks = list(_CHUNK.finditer(text))
    for k, match in enumerate(chunks):
        chunk = match.group()
        # Punkt weighs only the last possible end in each chunk, with the whole chunk before it.
        for i in range(len(chunk) - 1, -1, -1):
            if chunk[i] not in _ENDS:
                continue
            if i + 1 < len(chunk):
                if chunk[i + 1] not in _NON_WORD:
                    continue
                context, following = chunk[: i + 2], match.start() + i + 1
            elif k + 1 < len(chunks):
                context, following = f"{chunk} {chunks[k + 1].group()}", chunks[k + 1].start()
            else:
                continue
            if _contains_break(context):
                spans.append((match.start() + i + 1, following))
            break
    pieces, start = [], 0
    for end, following in spans:
        pieces.append([start, end])
        start = following
    pieces.append([start, len(text.rstrip())])
    # Closing quotes and brackets at the start of a sentence belong to the one before.
    for previous, piece in itertools.pairwise(pieces):
        closers = _LEADING_CLOSERS.match(text, piece[0], piece[1])
        if closers:
            previous[1] = piece[0] = closers.end()
            while piece[0] < piece[1] and text[piece[0]].isspace():
                piece[0] += 1
    return [text[a:b] for a, b in pieces if text[a:b]]


# ---- Treebank-style word splitting ----------------------------------------------------------------
_RULES: list[tuple[re.Pattern[str], str]] = [
    # opening quotes
    (re.compile("([\u00ab\u201c\u2018\u201e]|`+)"), r" \1 "),
    (re.compile(r'^"'), "``"),
    (re.compile(r"(``)"), r" \1 "),
    (re.compile(r"([ (\[{<])(\"|'')"), r"\1 `` "),
    (re.compile(r"(?i)(')(?!re|ve|ll|m|t|s|d|n)(\w)\b"), r"\1 \2"),
]
_PUNCTUATION_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"([:,])([^\d])"), r" \1 \2"),
    (re.compile(r"([:,])$"), r" \1 "),
    (re.compile(r"\.\.+"), r" \g<0> "),
    (re.compile(r"[;@#$%&]"), r" \g<0> "),
    (re.compile(r"[?!]"), r" \g<0> "),
    (re.compile(r"([^'])' "), r"\1 ' "),
    (re.compile(r"\*"), r" \g<0> "),
    (re.compile(r"[\][(){}<>]"), r" \g<0> "),
    (re.compile(r"--"), r" -- "),
]
_PADDED_RULES: list[tuple[re.Pattern[str], str]] = [
    # closing quotes and clitics, on the text padded with a space at both ends
    (re.compile("([\u00bb\u201d\u2019])"), r" \1 "),
    (re.compile(r"''"), " '' "),
    (re.compile(r'"'), " '' "),
    (re.compile(r"\s+"), " "),
    (re.compile(r"([^' ])('[sSmMdD]|') "), r"\1 \2 "),
    (re.compile(r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) "), r"\1 \2 "),
]


#: What may follow a sentence's last period (besides whitespace) for it to split off.
_AFTER_FINAL_PERIOD = "])}>\"'\u00bb\u201d\u2019 "


def _split_final_period(sentence: str) -> str:
    """The sentence with its last `.` split off, when only closing brackets, quotes and spaces
    follow it and it is not part of a dot run (a scan, not a backtracking pattern)."""
    dot = sentence.rfind(".")
    if dot < 1 or sentence[dot - 1] == ".":
        return sentence
    tail = sentence[dot + 1 :]
    closers = tail[: len(tail) - len(tail.lstrip(_AFTER_FINAL_PERIOD))]
    if tail[len(closers) :].strip():
        return sentence
    return f"{sentence[:dot]} . {closers} "


def sentence_tokens(sentence: str) -> list[str]:
    """The Treebank-style tokens of one sentence."""
    for pattern, replacement in _RULES:
        sentence = pattern.sub(replacement, sentence)
    sentence = _split_final_period(sentence)
    for pattern, replacement in _PUNCTUATION_RULES:
        sentence = pattern.sub(replacement, sentence)
    sentence = f" {sentence} "
    for pattern, replacement in _PADDED_RULES:
        sentence = pattern.sub(replacement, sentence)
    return sentence.split()


def word_tokens(text: str) -> list[str]:
    """The tokens NLTK's `word_tokenize(text)` gives (see the module docstring for the limits).

    >>> word_tokens("there are 10 orders, (0 canceled) and 1/2 shipped.")
    ['there', 'are', '10', 'orders', ',', '(', '0', 'canceled', ')', 'and', '1/2', 'shipped', '.']
    """
    return [token for sentence in sentences(text) for token in sentence_tokens(sentence)]
