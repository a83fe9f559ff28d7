# The `local` transport joins threads of one process, so across processes it
# can only form a group of one: this runs the suite as a single rank bootstrapped
# through commrun's TCP store (config from the environment, rank 0 serving).
# Multi-rank coverage over real processes comes from ucx/ofi/gloo.cmake.
comm_mp_test(NAME mp_local_suite_1rank RANKS 1 LABELS mp
  ENV COMM_TRANSPORT=local TIMEOUT 300
  COMMAND comm-mp-suite)

# No transport named and ranks in separate processes: the peer table says so,
# and `auto` picks per pair the best transport that reaches it (here, one
# host: the first of shm, ucx, ofi, gloo) instead of `local` (which would fail).
if(NOT COMM_ENABLED_TRANSPORTS STREQUAL "local")
  comm_mp_test(NAME mp_default_transport_2 RANKS 2 LABELS mp TIMEOUT 120
    COMMAND comm-info)
  set_tests_properties(mp_default_transport_2 PROPERTIES
    PASS_REGULAR_EXPRESSION "transport auto\n.*Hosts \\(1;.*host 0 \\([^)]*\\): ranks 0, 1.*0->1, 1->0 +[a-z]+ +alpha.*auto: (shm|ucx|ofi|gloo) \\(on one host: first available of shm")
endif()

# comm-info plans on a preset cluster without a job: on 2 hosts of 8 H100 the
# split-rail hierarchical all-reduce is the fastest at 256 MiB.
add_test(NAME comm_info_fabric_preset COMMAND comm-info --fabric h100-2x8 --size 256M)
set_tests_properties(comm_info_fabric_preset PROPERTIES LABELS mp TIMEOUT 60
  PASS_REGULAR_EXPRESSION "Hosts: 2 of 8 ranks.*allreduce at 256 MiB: fastest first[^\n]*\n +hierarchical_rail ")
