"""The HTTP server: OpenAI (Chat Completions, Responses) and Anthropic (Messages) endpoints.

The codec converts and encodes each request, a ``TokenBackend`` (``backend.py``) generates token IDs
from token IDs, and the codec's stream processor and chunk generators turn them back into the API's
chunks. The backend is either our engine in process (``deepseek_engine`` provides it) or an existing
vLLM / SGLang fleet. This package never imports torch.
"""
