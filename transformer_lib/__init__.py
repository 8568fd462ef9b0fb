"""transformer_lib: the encoder-decoder Transformer of *The Tested Transformer*, one module per chapter."""

__version__ = "0.1.0"
