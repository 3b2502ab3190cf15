"""DeepSeek V4: config, model, paged cache (``kv_cache``), serving wrapper, decode plan and V4-only layers."""
