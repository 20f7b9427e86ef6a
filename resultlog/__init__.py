"""An event-sourced results log on Kafka for LLM evaluation harnesses."""

from resultlog._hotpath import fold_path, install

# Before any module of the fold is imported: it chooses between the compiled ones and their twins.
install()

__all__ = ["fold_path"]
