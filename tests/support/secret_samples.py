"""Sample secrets and ordinary text, written here by hand: never derived from ``sseguard.core.redact``'s
rules.

The secrets are fake but shaped like the real thing (vendor prefixes and lengths as issued); each
comes with a line that carries it the way logs, bodies and configs do.
"""

from __future__ import annotations

#: (the secret, a line of text that carries it). Every secret must be gone from its line.
SECRET_SAMPLES: list[tuple[str, str]] = [
    ("sk-proj-Xq3vB8nT2mK9pL4wR7yZ1cF6hJ0dS5aE",
     "OpenAI key sk-proj-Xq3vB8nT2mK9pL4wR7yZ1cF6hJ0dS5aE in a log"),
    ("sk-ant-api03-Qw8eR4tY1uI9oP3aS7dF2gH6jK0lZ5xC-vB8nM4qW1eR7tYuAA",
     "anthropic: sk-ant-api03-Qw8eR4tY1uI9oP3aS7dF2gH6jK0lZ5xC-vB8nM4qW1eR7tYuAA"),
    ("hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567", "HF_HUB token=hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567 ok"),
    ("hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa76543210", "login with hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa76543210."),
    ("ghp_1A2b3C4d5E6f7G8h9I0jK1lM2nO3pQ4rS5tU",
     "git clone https://ghp_1A2b3C4d5E6f7G8h9I0jK1lM2nO3pQ4rS5tU@github.com/o/r"),
    ("github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRST",
     "pat: github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRST"),
    ("AKIAIOSFODNN7EXAMPLE", "aws_access_key_id AKIAIOSFODNN7EXAMPLE region us-east-1"),
    ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
     "slack bot xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx posted"),
    ("AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
     "GET /v1beta/models/gemini:streamGenerateContent?alt=sse&key=AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"),
    ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0."
     "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
     '{"id_jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0.'
     'SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"}'),
    ("oc_sk-9fK2mQ7xL4vB1nR8tY3wE6zA0cD5hJ", "OPENCODE_GO_API_KEY=oc_sk-9fK2mQ7xL4vB1nR8tY3wE6zA0cD5hJ"),
    ("gho_16C7e42F292c6912E7710c838347Ae178B4a",
     'export GH_TOKEN="gho_16C7e42F292c6912E7710c838347Ae178B4a"'),
    ("Wq8x-pg-pass-31415", "DATABASE_PASSWORD=Wq8x-pg-pass-31415\nDEBUG=1"),
    ("tP9vX2kL7qM4nB8w", "https://api.example.com/v1/search?q=cats&api_key=tP9vX2kL7qM4nB8w&page=2"),
    ("0a1b2c3d4e5f60718293", "https://maps.example.org/geo?key=0a1b2c3d4e5f60718293"),
    ("Zm9vYmFyYmF6cXV4MTIz", "redirect to /cb#state=x&access_token=Zm9vYmFyYmF6cXV4MTIz&expires_in=3600"),
    ("s3cr3t-sess-4f9a2b", "Cookie: theme=dark; sessionid=s3cr3t-sess-4f9a2b"),
    ("Zt4Kq9wLm2Xv7Bn1", "cookie: csrftoken=Zt4Kq9wLm2Xv7Bn1; lang=en"),
    ("Yh7Gf3Dk9Lm2Np5Q", "Set-Cookie: __Host-sid=Yh7Gf3Dk9Lm2Np5Q; Path=/; Secure; HttpOnly"),
    ("dXNlcjpwYXNzd29yZDEyMw==", "Authorization: Basic dXNlcjpwYXNzd29yZDEyMw=="),
    ("7f3c2a91-d4e5-4b6c-8a9f-0e1d2c3b4a59",
     "curl -H 'Authorization: Bearer 7f3c2a91-d4e5-4b6c-8a9f-0e1d2c3b4a59'"),
    ("opaque.Tok3n_value", "sent bearer opaque.Tok3n_value to upstream"),
    ("sk_live_51HxAbCdEfGhIjKlMnOpQrStUv", "stripe sk_live_51HxAbCdEfGhIjKlMnOpQrStUv charge"),
    ("glpat-xY9zW8vU7tS6rQ5pO4nM", "gitlab glpat-xY9zW8vU7tS6rQ5pO4nM"),
    ("npm_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5",
     "//registry.npmjs.org/:_authToken=npm_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5"),
    ("ya29.a0AfH6SMBx3kLmNoPqRsTuVwXyZ012345", "access ya29.a0AfH6SMBx3kLmNoPqRsTuVwXyZ012345 expired"),
    ("hunter2hunter2", '{"password": "hunter2hunter2", "user": "ann"}'),
    ("c1i3nt-s3cr3t-v4lu3", 'client_secret=c1i3nt-s3cr3t-v4lu3'),
]

#: Ordinary text that must come back unchanged: prose, JSON, code, URLs, ids, hashes, base64.
ORDINARY: list[str] = [
    "The key to a good stream is that it ends with a finish_reason and data: [DONE].",
    "A basic understanding of the bearer of bad news: tokens are counted, not trusted.",
    "She baked a cookie and a cake; the monkey ate both.",
    '{"id":"chatcmpl-9f2c","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
    '{"content":"Hello"},"finish_reason":null}],"usage":{"prompt_tokens":12,"completion_tokens":7,'
    '"total_tokens":19}}',
    'data: {"type":"response.output_text.delta","sequence_number":4,"delta":"sk"}',
    "def primary(key: str, tokens: list[int]) -> dict[str, int]:\n    return {key: len(tokens)}",
    "for (const [key, value] of Object.entries(map)) { console.log(key, value); }",
    "https://github.com/python-hyper/h11/blob/master/h11/_events.py#L42",
    "https://example.com/search?q=streaming+llm&page=3&sort=recent&lang=en",
    "https://huggingface.co/deepseek-ai/DeepSeek-V3.2/resolve/main/tokenizer_config.json",
    "request id 3f1c2b4a-9d8e-4f7a-b6c5-1e2d3c4b5a69 took 231 ms",
    "commit 0a6b7a6e1c4f5d2b9e8a7c6d5f4e3b2a1c0d9e8f (HEAD -> main)",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA"
    "60e6kgAAAABJRU5ErkJggg==",
    "x-ratelimit-remaining-tokens: 149984",
    "task-manager disk-space ask-me risk-free",
    "PATH=/usr/local/bin:/usr/bin HOME=/home/ann LANG=C.UTF-8 MAX_TOKENS=4096",
    "SELECT id, name FROM users WHERE key_id = 7 ORDER BY created_at DESC;",
    "The password manager stores nothing here; see the docs.",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}",
    "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}</tool_call>",
    "Tokens per second: 41.7; time to first token: 212 ms; 1,024 tokens in total.",
]


