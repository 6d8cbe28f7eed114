"""The cloud planner's HTTP contract (SPEC §3): wire models, the httpx client, retry policy."""
