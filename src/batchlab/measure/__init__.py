"""Measurement with torch on the reader's NPU, GPU or CPU: the device layer, the GPT, data, training, gradient noise, memory, matmul rates and pipeline runs."""
