"""The bounds on what the models compute, in one place (no imports, so that the command line
can name them in its help without loading the models).

Every model runs on arrays in memory; the bounds keep any option value from asking for more
memory or time than a laptop has, and keep every number inside int64. A request past them is
a usage error that names the bound, never a MemoryError, a hang or a wrapped-around number.
"""

# Numbers in an index (literals, parameters, terms, array sizes) stay below 2^58: an index
# times an element size (at most 16 bytes) plus a base address still fits int64.
INDEX_LIMIT_BITS = 58
INDEX_LIMIT = 2**INDEX_LIMIT_BITS

# A trace takes about 100 bytes of memory an access while it is built: 30 million accesses
# is about 3 GB and half a minute.
MAX_TRACE_ACCESSES = 30_000_000

# ``model reuse``'s default budget a simulated trace: its tile search and its table of
# variants run at one size whose longest trace has at most this many accesses (seconds).
DEFAULT_REUSE_ACCESSES = 2_000_000

# The largest cache simulated: the simulator holds a tag, a time stamp and a dirty flag for
# every line of every level (1 GiB of 64-byte lines is 16 M lines, about 300 MB); no CPU's
# cache comes near it.
MAX_CACHE_BYTES = 2**30
