"""A seeded synthetic encyclopedia: invented entities, article-like documents, and multi-hop questions.

Every fact is invented, so a model cannot answer from memory: it has to search. The world is made of
people, cities, countries, organisations, works, rivers and mountains with attributes (years,
populations, lengths, ...) and relations (born in, founded by, capital of, ...). Each entity has one
article (title on the first line, as in wiki-18) that states its own facts and nothing that belongs
to another entity's article, so a k-hop question needs k lookups.

Questions come in four kinds (the task `category`): `single-hop`, `bridge` (2 hops through an
intermediate entity), `comparison` (two lookups, then compare), and `multi-hop` (3-4 hops). Each has
its gold answers and its reasoning chain: for every hop, the entity whose article holds the fact,
the fact's text, and a sensible search query.

The world is generated in self-contained blocks of `BLOCK_DOCS` documents; the test split is drawn
from block 0 alone, so it is the same for every `num_docs >= BLOCK_DOCS` (bigger corpora add
distractor blocks and training questions). A smaller `num_docs` gives a smaller block 0 and a
different test split.

    >>> data = generate(num_docs=300, seed=1, test_size=8)
    >>> len(data.documents), len(data.questions["test"])
    (300, 8)
    >>> question = data.questions["test"][0]
    >>> question.category in CATEGORIES and len(question.chain) >= 1
    True
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

#: Bump when the generated text or questions change: cached corpora are keyed by it.
GENERATOR_VERSION = 4
#: Documents per self-contained block of the world.
BLOCK_DOCS = 20_000
#: Size of the fixed test split (drawn from block 0, equal shares per category).
TEST_SIZE = 1_000
#: Training questions generated per document.
TRAIN_PER_DOC = 0.5
CATEGORIES = ("single-hop", "bridge", "comparison", "multi-hop")

# Share of each entity kind among a block's documents (one article per entity).
_KIND_SHARES = {
    "country": 0.002,
    "city": 0.12,
    "river": 0.02,
    "mountain": 0.02,
    "organisation": 0.16,
    "person": 0.40,
    "work": 0.278,
}
_CREATIVE = {  # occupation: the kind of work it creates
    "novelist": "novel",
    "film director": "film",
    "musician": "album",
    "painter": "painting",
    "composer": "opera",
}
_OTHER_JOBS = (
    "physicist",
    "chemist",
    "engineer",
    "architect",
    "economist",
    "politician",
    "merchant",
    "diplomat",
    "historian",
    "mathematician",
)
_ORG_KINDS = {  # kind: (share, name suffixes, description)
    "university": (0.15, ("University", "College"), "a university"),
    "company": (0.35, ("Dynamics", "Shipping", "Textiles", "Mining", "Motors", "Chemicals", "Railways"), "a company"),
    "institute": (0.15, ("Institute", "Laboratories", "Observatory"), "a research institute"),
    "publisher": (0.12, ("Press", "Books", "Publishing"), "a publishing house"),
    "studio": (0.12, ("Pictures", "Studios", "Films"), "a film studio"),
    "label": (0.11, ("Records", "Music", "Recordings"), "a record label"),
}
_PUBLISHER_OF = {"novel": "publisher", "film": "studio", "album": "label"}
_TITLE_PATTERNS = (
    "{w}",
    "The {w} Affair",
    "Songs of {w}",
    "The Last {w}",
    "Winter in {w}",
    "A {w} Morning",
    "The {w} Letters",
    "Beyond {w}",
    "The House of {w}",
    "{w} Nights",
)
_COUNTRY_SUFFIXES = ("ia", "land", "ova", "esh", "ara")
_CITY_SUFFIXES = ("", "", "", "holt", "port", "burg", "mere", "ford", "vik")
_ONSETS = ("b", "br", "c", "d", "dr", "f", "g", "gr", "h", "k", "l", "m", "n", "p", "r", "s", "st", "t", "tr", "v", "z")
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "ai", "ei", "ou")
_CODAS = ("", "", "", "", "", "n", "r", "l", "s", "m", "nd", "rn", "th", "x", "lt")


@dataclass(frozen=True)
class Hop:
    """One step of a reasoning chain: the article of `subject` states `relation` = `value`."""

    subject: str
    relation: str
    value: str
    query: str


@dataclass(frozen=True)
class Question:
    """A question with its gold answers; `chain` is empty for user-provided data."""

    id: str
    question: str
    golden_answers: tuple[str, ...]
    category: str
    chain: tuple[Hop, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "question": self.question,
            "golden_answers": list(self.golden_answers),
            "category": self.category,
            "chain": [[h.subject, h.relation, h.value, h.query] for h in self.chain],
        }

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> Question:
        chain = tuple(Hop(*hop) for hop in row.get("chain", ()))
        return cls(row["id"], row["question"], tuple(row["golden_answers"]), row["category"], chain)


@dataclass(eq=False)
class Entity:
    kind: str
    name: str
    sub: str = ""  # occupation, organisation kind, work type
    facts: dict[str, Any] = field(default_factory=dict)  # relation -> Entity or int/str
    short: str = ""  # how later sentences of its article refer to it (a person's family name)
    aliases: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)  # sentences that state no fact a question asks about


@dataclass
class SyntheticData:
    """The generated corpus (`{"id", "contents"}` rows, title on the first line) and the question splits."""

    documents: list[dict[str, str]]
    questions: dict[str, list[Question]]


# ---- relations ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Relation:
    name: str
    subject: str  # entity kind
    keyword: str  # added to the subject's name to make a search query
    ask: str  # the question, "{x}" is the subject (a name or a noun phrase)
    phrase: str = ""  # noun phrase for the object, for entity-valued relations ("the founder of {x}")


_RELATIONS = {
    r.name: r
    for r in (
        _Relation("birthplace", "person", "born", "In which city was {x} born?", "the birthplace of {x}"),
        _Relation("birth_year", "person", "born", "In which year was {x} born?"),
        _Relation("occupation", "person", "profession", "What is the profession of {x}?"),
        _Relation("alma_mater", "person", "studied", "Which university did {x} attend?", "the university {x} attended"),
        _Relation("employer", "person", "worked", "Which organisation did {x} work for?", "the employer of {x}"),
        _Relation("spouse", "person", "married", "Who is the spouse of {x}?", "the spouse of {x}"),
        _Relation("creator", "work", "by", "Who created {x}?", "the creator of {x}"),
        _Relation("year", "work", "year", "In which year did {x} come out?"),
        _Relation("publisher", "work", "released", "Which company released {x}?", "the company that released {x}"),
        _Relation("setting", "work", "set", "In which city is {x} set?", "the city in which {x} is set"),
        _Relation("country", "city", "country", "In which country is {x}?", "the country in which {x} lies"),
        _Relation("founded", "city", "founded", "In which year was {x} founded?"),
        _Relation("population", "city", "population", "What is the population of {x}?"),
        _Relation("river", "city", "river", "On which river does {x} lie?", "the river on which {x} lies"),
        _Relation("capital", "country", "capital", "What is the capital of {x}?", "the capital of {x}"),
        _Relation("language", "country", "language", "What is the official language of {x}?"),
        _Relation("currency", "country", "currency", "What is the currency of {x}?"),
        _Relation("independence", "country", "independent", "In which year did {x} become independent?"),
        _Relation("founder", "organisation", "founded", "Who founded {x}?", "the founder of {x}"),
        _Relation("org_founded", "organisation", "founded", "In which year was {x} founded?"),
        _Relation(
            "headquarters",
            "organisation",
            "headquartered",
            "In which city is {x} headquartered?",
            "the city where {x} is headquartered",
        ),
        _Relation("length", "river", "long", "How long is {x}, in kilometres?"),
        _Relation("source", "river", "rises", "On which mountain does {x} rise?", "the mountain where {x} rises"),
        _Relation(
            "flows_through",
            "river",
            "country",
            "Through which country does {x} flow?",
            "the country through which {x} flows",
        ),
        _Relation("height", "mountain", "high", "How high is {x}, in metres?"),
        _Relation(
            "mountain_country", "mountain", "country", "In which country is {x}?", "the country in which {x} stands"
        ),
    )
}
# Work relations read better with the work's own verbs.
_WORK_ASK = {
    ("creator", "novel"): ("Who wrote {x}?", "the author of {x}"),
    ("creator", "film"): ("Who directed {x}?", "the director of {x}"),
    ("creator", "album"): ("Which musician recorded {x}?", "the musician who recorded {x}"),
    ("creator", "painting"): ("Who painted {x}?", "the painter of {x}"),
    ("creator", "opera"): ("Who composed {x}?", "the composer of {x}"),
    ("year", "novel"): ("In which year was {x} published?", ""),
    ("year", "film"): ("In which year was {x} released?", ""),
    ("year", "album"): ("In which year was {x} released?", ""),
    ("year", "painting"): ("In which year was {x} completed?", ""),
    ("year", "opera"): ("In which year did {x} premiere?", ""),
    ("publisher", "novel"): ("Which company published {x}?", "the publisher of {x}"),
    ("publisher", "film"): ("Which studio produced {x}?", "the studio that produced {x}"),
    ("publisher", "album"): ("Which record label released {x}?", "the record label of {x}"),
}
_COMPARISONS = {  # kind: (relation, question, True when the larger value wins)
    "person": ("birth_year", "Who was born earlier, {a} or {b}?", False),
    "organisation": ("org_founded", "Which was founded earlier, {a} or {b}?", False),
    "city": ("population", "Which city has the larger population, {a} or {b}?", True),
    "river": ("length", "Which river is longer, {a} or {b}?", True),
    "mountain": ("height", "Which mountain is higher, {a} or {b}?", True),
    "work": ("year", "Which came out earlier, {a} or {b}?", False),
}


def _ask(relation: _Relation, subject: Entity) -> tuple[str, str]:
    return _WORK_ASK.get((relation.name, subject.sub), (relation.ask, relation.phrase))


def _value_text(relation: str, value: Any) -> str:
    if isinstance(value, Entity):
        return value.name
    if relation in ("population", "length", "height"):
        return f"{value:,}"
    return str(value)


def _golden(relation: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, Entity):
        return (value.name, *value.aliases)
    text = _value_text(relation, value)
    if relation == "length":
        return text, f"{text} km", f"{text} kilometres"
    if relation == "height":
        return text, f"{text} m", f"{text} metres"
    return (text,)


# ---- names ----------------------------------------------------------------------------------------
def _reserved_words() -> frozenset[str]:
    """Words of the templates, which no invented name may be (they would blur retrieval)."""
    texts = [r.ask + " " + r.phrase for r in _RELATIONS.values()]
    texts += [a + " " + p for a, p in _WORK_ASK.values()]
    texts += [q for _, q, _ in _COMPARISONS.values()]
    texts += [*_CREATIVE, *_CREATIVE.values(), *_OTHER_JOBS, *_TITLE_PATTERNS]
    texts += [" ".join(suffixes) + " " + desc for _, suffixes, desc in _ORG_KINDS.values()]
    texts.append(_ARTICLE_WORDS)
    return frozenset(w.strip(".,?'{}").lower() for text in texts for w in text.split())


_ARTICLE_WORDS = (
    "born is a who was in the studied at educated worked for later joined married to works include known for"
    " lived many years city country capital population founded lies on river official language currency"
    " became independent mountain metres high kilometres long rises headquartered by it its published released"
    " directed produced painted completed premiered opera novel film album painting set story story's whose"
    " part of based spent many years later settled known borders employs about people first climbed well"
    " received critics commercial success adapted stage old harbour cathedral textile market stone bridges"
    " botanical garden music festival"
)


class _Names:
    """Invented words, unique across the whole world (blocks are generated in order)."""

    def __init__(self) -> None:
        self.used: set[str] = set()
        self.reserved = _reserved_words()

    def word(self, rng: random.Random, suffix: str = "") -> str:
        while True:
            syllables = rng.choice((2, 2, 3))
            word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables))
            word = (word + suffix).capitalize()
            key = word.lower()
            if 4 <= len(word) <= 10 and key not in self.used and key not in self.reserved:
                self.used.add(key)
                return word


# ---- the world ------------------------------------------------------------------------------------
def _counts(block_docs: int) -> dict[str, int]:
    counts = {kind: max(2, round(share * block_docs)) for kind, share in _KIND_SHARES.items()}
    counts["work"] += block_docs - sum(counts.values())  # works absorb the rounding
    if counts["work"] < 2:
        raise ValueError(f"num_docs={block_docs} is too small for a synthetic world; use at least 100")
    return counts


def _build_block(rng: random.Random, names: _Names, block_docs: int) -> list[Entity]:
    """The entities of one self-contained block, in article order."""
    counts = _counts(block_docs)
    countries = []
    for _ in range(counts["country"]):
        stem = names.word(rng)
        country = Entity("country", names.word(rng, rng.choice(_COUNTRY_SUFFIXES)))
        country.facts["language"] = stem + rng.choice(("ic", "ese", "ish", "ian"))
        names.used.add(country.facts["language"].lower())
        country.facts["currency"] = names.word(rng).lower()
        country.facts["independence"] = rng.randint(1500, 1990)
        countries.append(country)
    mountains = []
    for _ in range(counts["mountain"]):
        word = names.word(rng)
        mountain = Entity("mountain", f"Mount {word}", aliases=(word,))
        mountain.facts.update(height=rng.randint(400, 8600), mountain_country=rng.choice(countries))
        mountains.append(mountain)
    rivers = []
    for _ in range(counts["river"]):
        word = names.word(rng)
        river = Entity("river", f"{word} River", aliases=(word,))
        river.facts.update(length=rng.randint(40, 4000), source=rng.choice(mountains))
        river.facts["flows_through"] = river.facts["source"].facts["mountain_country"]
        rivers.append(river)
    cities = []
    for i in range(counts["city"]):
        city = Entity("city", names.word(rng, rng.choice(_CITY_SUFFIXES)))
        country = countries[i % len(countries)]  # every country gets cities; its first is the capital
        city.facts.update(country=country, founded=rng.randint(700, 1900), population=rng.randint(2_000, 4_000_000))
        if i < len(countries):
            country.facts["capital"] = city
            city.facts["population"] = rng.randint(400_000, 9_000_000)
        if rng.random() < 0.6:
            city.facts["river"] = rng.choice(rivers)
        cities.append(city)
    orgs: dict[str, list[Entity]] = {kind: [] for kind in _ORG_KINDS}
    org_kinds = list(_ORG_KINDS)
    org_weights = [share for share, _, _ in _ORG_KINDS.values()]
    org_list = []
    for i in range(counts["organisation"]):
        kind = org_kinds[i] if i < len(org_kinds) else rng.choices(org_kinds, org_weights)[0]
        org = Entity("organisation", f"{names.word(rng)} {rng.choice(_ORG_KINDS[kind][1])}", sub=kind)
        org.facts["headquarters"] = rng.choice(cities)
        orgs[kind].append(org)
        org_list.append(org)
    given = [names.word(rng) for _ in range(max(8, counts["person"] // 25))]
    persons = []
    jobs = list(_CREATIVE) + list(_OTHER_JOBS)
    for i in range(counts["person"]):
        family = names.word(rng)
        person = Entity("person", f"{rng.choice(given)} {family}", short=family)
        person.sub = jobs[i] if i < len(_CREATIVE) else rng.choice(jobs)  # every creative job is taken
        person.facts.update(birth_year=rng.randint(1780, 1985), birthplace=rng.choice(cities), occupation=person.sub)
        if rng.random() < 0.7:
            person.facts["alma_mater"] = rng.choice(orgs["university"])
        if rng.random() < 0.6:
            person.facts["employer"] = rng.choice(orgs[rng.choice(("company", "institute"))])
        persons.append(person)
    singles = [p for p in persons if rng.random() < 0.35]
    for a, b in zip(singles[0::2], singles[1::2], strict=False):
        a.facts["spouse"], b.facts["spouse"] = b, a
    for org in org_list:
        founder = rng.choice(persons)
        org.facts.update(founder=founder, org_founded=min(founder.facts["birth_year"] + rng.randint(22, 60), 2020))
    creators = {job: [p for p in persons if p.sub == job] for job in _CREATIVE}
    works = []
    for i in range(counts["work"]):
        job = list(_CREATIVE)[i % len(_CREATIVE)]
        creator = rng.choice(creators[job])
        title = rng.choice(_TITLE_PATTERNS).format(w=names.word(rng))
        work = Entity("work", title, sub=_CREATIVE[job])
        work.facts.update(creator=creator, year=min(creator.facts["birth_year"] + rng.randint(20, 60), 2023))
        if work.sub in _PUBLISHER_OF:
            work.facts["publisher"] = rng.choice(orgs[_PUBLISHER_OF[work.sub]])
        if work.sub in ("novel", "film"):
            work.facts["setting"] = rng.choice(cities)
        creator.facts.setdefault("works", []).append(work)
        works.append(work)
    entities = countries + mountains + rivers + cities + org_list + persons + works
    for e in entities:
        _add_notes(rng, e, cities, countries)
    # Article order: interleave kinds so that document ids reveal nothing about an entity's kind.
    rng.shuffle(entities)
    return entities


_FEATURES = ("old harbour", "cathedral", "textile market", "stone bridges", "botanical garden", "music festival")
_RECEPTION = ("It was well received by critics.", "It was a commercial success.", "It was later adapted for the stage.")


def _add_notes(rng: random.Random, e: Entity, cities: list[Entity], countries: list[Entity]) -> None:
    """Sentences that make articles read like articles and mention other entities (distractors)."""
    if e.kind == "person" and rng.random() < 0.6:
        city = rng.choice(cities).name
        e.notes.append(rng.choice((f"{e.short} spent many years in {city}.", f"{e.short} later settled in {city}.")))
    elif e.kind == "city" and rng.random() < 0.5:
        e.notes.append(f"{e.name} is known for its {rng.choice(_FEATURES)}.")
    elif e.kind == "country" and len(countries) > 1:
        e.notes.append(f"{e.name} borders {rng.choice([c for c in countries if c is not e]).name}.")
    elif e.kind == "organisation" and rng.random() < 0.6:
        e.notes.append(f"It employs about {rng.randint(2, 400) * 50:,} people.")
    elif e.kind == "mountain" and rng.random() < 0.5:
        e.notes.append(f"It was first climbed in {rng.randint(1780, 1990)}.")
    elif e.kind == "work" and rng.random() < 0.5:
        e.notes.append(rng.choice(_RECEPTION))


# ---- articles ---------------------------------------------------------------------------------------
def _article(e: Entity, rng: random.Random) -> str:
    f, name = e.facts, e.name
    pick = rng.choice
    if e.kind == "person":
        short = e.short
        born, city, job = f["birth_year"], f["birthplace"].name, e.sub
        article = "an" if job[0] in "aeiou" else "a"
        lines = [
            pick(
                (
                    f"{name} (born {born}) is {article} {job} who was born in {city}.",
                    f"{name} is {article} {job}, born in {city} in {born}.",
                    f"Born in {city} in {born}, {name} is {article} {job}.",
                )
            )
        ]
        extra = []
        if "alma_mater" in f:
            extra.append(
                pick(
                    (f"{short} studied at {f['alma_mater'].name}.", f"{short} was educated at {f['alma_mater'].name}.")
                )
            )
        if "employer" in f:
            extra.append(
                pick((f"{short} worked for {f['employer'].name}.", f"{short} later joined {f['employer'].name}."))
            )
        if "spouse" in f:
            extra.append(pick((f"{short} married {f['spouse'].name}.", f"{short} is married to {f['spouse'].name}.")))
        if f.get("works"):
            titles = [w.name for w in f["works"][:3]]
            listed = titles[0] if len(titles) == 1 else ", ".join(titles[:-1]) + " and " + titles[-1]
            extra.append(f"{short} is known for {listed}.")
        extra += e.notes
        rng.shuffle(extra)
        return "\n".join([name, " ".join(lines + extra)])
    if e.kind == "city":
        lines = [f"{name} is a city in {f['country'].name}, founded in {f['founded']}."]
        if f["country"].facts.get("capital") is e:
            lines.append(f"{name} is the capital of {f['country'].name}.")
        lines.append(pick((f"It has a population of {f['population']:,}.", f"Its population is {f['population']:,}.")))
        if "river" in f:
            lines.append(f"{name} lies on the {f['river'].name}.")
        return "\n".join([name, " ".join(lines + e.notes)])
    if e.kind == "country":
        lines = [
            f"{name} is a country whose capital is {f['capital'].name}.",
            f"The official language of {name} is {f['language']}, and its currency is the {f['currency']}.",
            f"{name} became independent in {f['independence']}.",
        ]
        return "\n".join([name, " ".join(lines + e.notes)])
    if e.kind == "mountain":
        country = f["mountain_country"].name
        return f"{name}\n{name} is a mountain in {country}, {f['height']:,} metres high. {' '.join(e.notes)}".rstrip()
    if e.kind == "river":
        country, source = f["flows_through"].name, f["source"].name
        return f"{name}\nThe {name} is a river in {country}, {f['length']:,} kilometres long. It rises on {source}."
    if e.kind == "organisation":
        description = _ORG_KINDS[e.sub][2]
        founder = f["founder"].name
        lines = [
            pick(
                (
                    f"{name} is {description} founded in {f['org_founded']} by {founder}.",
                    f"{name} is {description}. It was founded by {founder} in {f['org_founded']}.",
                )
            ),
            f"It is headquartered in {f['headquarters'].name}.",
        ]
        return "\n".join([name, " ".join(lines + e.notes)])
    creator, year = f["creator"].name, f["year"]
    a = "an" if 1800 <= year < 1900 or 1100 <= year < 1200 else "a"  # "an eighteen-..."
    first = {
        "novel": f"{name} is {a} {year} novel by {creator}.",
        "film": f"{name} is {a} {year} film directed by {creator}.",
        "album": f"{name} is {a} {year} album by {creator}.",
        "painting": f"{name} is a painting by {creator}, completed in {year}.",
        "opera": f"{name} is an opera by {creator} that premiered in {year}.",
    }[e.sub]
    lines = [first]
    if "publisher" in f:
        verb = {"novel": "published", "film": "produced", "album": "released"}[e.sub]
        lines.append(f"It was {verb} by {f['publisher'].name}.")
    if "setting" in f:
        lines.append(f"The story is set in {f['setting'].name}.")
    return "\n".join([name, " ".join(lines + e.notes)])


# ---- questions --------------------------------------------------------------------------------------
def _relations_of(e: Entity) -> list[str]:
    return [r for r in _RELATIONS if _RELATIONS[r].subject == e.kind and r in e.facts]


def _hop(subject: Entity, relation: str) -> Hop:
    value = subject.facts[relation]
    return Hop(subject.name, relation, _value_text(relation, value), f"{subject.name} {_RELATIONS[relation].keyword}")


def _chain_question(rng: random.Random, start: Entity, hops: int) -> tuple[str, tuple[str, ...], list[Hop]] | None:
    """A question that follows `hops` relations from `start`; None when the walk gets stuck."""
    entity, seen, chain, phrase = start, {id(start)}, [], start.name
    for step in range(hops):
        last = step == hops - 1
        options = [r for r in _relations_of(entity) if last or isinstance(entity.facts[r], Entity)]
        options = [r for r in options if not isinstance(entity.facts[r], Entity) or id(entity.facts[r]) not in seen]
        if not options:
            return None
        relation = rng.choice(options)
        chain.append(_hop(entity, relation))
        ask, noun = _ask(_RELATIONS[relation], entity)
        value = entity.facts[relation]
        if last:
            return ask.format(x=phrase), _golden(relation, value), chain
        phrase = noun.format(x=phrase)
        entity = value
        seen.add(id(entity))
    return None


def _comparison(rng: random.Random, pools: dict[str, list[Entity]]) -> tuple[str, tuple[str, ...], list[Hop]] | None:
    kind = rng.choice(list(_COMPARISONS))
    relation, template, larger_wins = _COMPARISONS[kind]
    a, b = rng.sample(pools[kind], 2)
    va, vb = a.facts[relation], b.facts[relation]
    if va == vb:
        return None
    winner = a if (va > vb) == larger_wins else b
    return template.format(a=a.name, b=b.name), (winner.name, *winner.aliases), [_hop(a, relation), _hop(b, relation)]


def _questions(rng: random.Random, entities: list[Entity], count: int, avoid: set[str]) -> list[tuple]:
    """`count` distinct (question, golden answers, category, chain), equal shares per category, none in `avoid`."""
    pools: dict[str, list[Entity]] = {}
    for e in entities:
        pools.setdefault(e.kind, []).append(e)
    starts = [e for e in entities if e.kind != "country"]  # a few dozen countries would dominate the chains
    out = []
    for i in range(count):
        category = CATEGORIES[i % len(CATEGORIES)]
        for _ in range(1000):
            if category == "comparison":
                made = _comparison(rng, pools)
            else:
                hops = {"single-hop": 1, "bridge": 2}.get(category) or rng.choice((3, 4))
                made = _chain_question(rng, rng.choice(starts), hops)
            if made is not None and made[0] not in avoid:
                text, golden, chain = made
                avoid.add(text)
                out.append((text, golden, category, tuple(chain)))
                break
        else:
            raise RuntimeError(f"could not generate a {category} question; the world is too small")
    return out


def generate(num_docs: int = BLOCK_DOCS, seed: int = 0, test_size: int = TEST_SIZE) -> SyntheticData:
    """The synthetic encyclopedia of `num_docs` articles and its `train` / `test` questions.

    Args:
        num_docs: Number of articles (blocks of `BLOCK_DOCS`; the last block may be smaller).
        seed: The world's seed; the same seed and sizes always give the same data.
        test_size: Number of test questions (from block 0).
    """
    if num_docs < 100:
        raise ValueError(f"num_docs must be at least 100, got {num_docs}")
    names = _Names()
    documents: list[dict[str, str]] = []
    blocks: list[list[Entity]] = []
    for block, start in enumerate(range(0, num_docs, BLOCK_DOCS)):
        rng = random.Random(f"agentgym-deepsearch/{seed}/{block}/world")
        entities = _build_block(rng, names, min(BLOCK_DOCS, num_docs - start))
        documents += [{"id": str(start + i), "contents": _article(e, rng)} for i, e in enumerate(entities)]
        blocks.append(entities)
    seen: set[str] = set()
    test = _questions(random.Random(f"agentgym-deepsearch/{seed}/0/test"), blocks[0], test_size, seen)
    train = []
    for block, entities in enumerate(blocks):
        rng = random.Random(f"agentgym-deepsearch/{seed}/{block}/train")
        train += _questions(rng, entities, round(TRAIN_PER_DOC * len(entities)), seen)
    questions = {
        split: [Question(f"{split}/{i:05d}", *row) for i, row in enumerate(rows)]
        for split, rows in (("train", train), ("test", test))
    }
    return SyntheticData(documents, questions)
