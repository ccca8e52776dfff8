"""One adapter per mechanism: parameters, guarantee, and the run on Dask partitions."""
