"""Evaluation: a model or a random policy over a split (`evaluate`), or an OpenAI-compatible endpoint (`endpoint`)."""
