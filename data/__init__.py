"""From parallel text on disk (or the built-in corpus) to token-budget batches. Knows nothing about the model."""
