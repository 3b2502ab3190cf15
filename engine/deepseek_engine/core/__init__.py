"""The model-agnostic serving core: scheduler, block manager, sequence, model runner, sampler (no architecture)."""
