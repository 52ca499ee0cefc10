"""WebArena's tasks: one config in WebArena's JSON format (`task`), directories of them and the bundled
set (`catalog`, with the hand-written ones in `configs/`), the embedded sites' task templates and their
shared vocabulary (`templates`), and the bundled train and test splits made from them (`splits`).
`agentgym tasks webarena` prints the bundled tasks' table."""
