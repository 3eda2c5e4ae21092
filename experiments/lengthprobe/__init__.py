"""P17 lengthprobe experiments: prompt-last decodability of output length, transfer."""
