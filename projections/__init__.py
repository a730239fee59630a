"""Pure folds over events: (state, event) -> state. No I/O, no Ray."""
