"""Transformer model and the paper's training recipe: a plain nn.Module and a thin LightningModule."""
