"""WebArena's tasks: configs in WebArena's JSON format (`catalog`, with the hand-written ones in
`configs/`), the embedded sites' task templates and their shared vocabulary (`templates`), and the
bundled train and test splits made from them (`splits`)."""
