"""Engine collectors: vLLM, SGLang, llama.cpp, Ollama, LiteLLM and generic OpenAI servers."""
