"""An event-sourced results log on Kafka for LLM evaluation harnesses."""
