"""The guard proxy: throughput, time to first chunk, CPU and memory against direct and a bare relay."""
