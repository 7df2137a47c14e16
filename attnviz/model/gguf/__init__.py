"""GGUF files (llama.cpp, Ollama, LM Studio) read as model folders: the header (`read`), its
metadata read by type (`metadata`), each architecture's facts (`families`), the config and
tensor names (`arch`), the tokenizer (`tokenizer`) and the converted folder (`convert`)."""
