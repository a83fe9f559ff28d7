# The `local` transport joins threads of one process, so across processes it
# can only form a group of one: this runs the suite as a single rank bootstrapped
# through commrun's TCP store (config from the environment, rank 0 serving).
# Multi-rank coverage over real processes comes from ucx/ofi/gloo.cmake.
comm_mp_test(NAME mp_local_suite_1rank RANKS 1 LABELS mp
  ENV COMM_TRANSPORT=local TIMEOUT 300
  COMMAND comm-mp-suite)
