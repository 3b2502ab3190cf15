"""DeepSeek V4.1: config, model, paged cache (``kv_cache``), serving wrapper and V4.1-only layers."""
