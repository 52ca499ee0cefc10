"""How a WebArena episode is scored: WebArena's evaluators (`evaluators`), the LLM judge of its fuzzy
matches (`judge`), its `func:` helpers (`functions`) and the word tokenizer of `must_include`
(`tokens`)."""
