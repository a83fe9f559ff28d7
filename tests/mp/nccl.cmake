# NCCL transport (labels `mp` and `nccl`): the GPU suite (tests/nccl/nccl_suite.cpp,
# built in tests/nccl) with one process per GPU. On a machine with fewer GPUs
# than ranks every rank exits 77 with the reason, so ctest reports SKIPPED.
# The shared comm-mp-suite is not used: it moves host memory, which NCCL refuses.
if(TARGET comm_nccl)
  foreach(n 2 4)
    comm_mp_test(NAME mp_nccl_suite_${n} RANKS ${n} LABELS mp nccl TIMEOUT 600
      ENV COMM_TRANSPORT=nccl
      COMMAND $<TARGET_FILE:nccl_suite>)
  endforeach()
endif()
