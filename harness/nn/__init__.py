"""Shared model building blocks (encoders, pooling, pair inputs, losses, MLM, decoder)."""
