# cmake -DPROGRAM=<shard_planner> -P examples_planner.cmake
#
# Physics the planner must respect: for a latency-bound decode all-reduce
# (batch 1: a few KiB) more ranks mean more steps on the critical path, so the
# predicted time of one all-reduce must rise strictly with the TP degree on
# every preset fabric, and TP 1 needs no communication at all. Compute per step
# must shrink as the TP degree grows.
foreach(fabric nvswitch nvlink pcie ib tcp)
  foreach(hidden 1024 4096)
    execute_process(COMMAND ${PROGRAM} --fabric ${fabric} --csv --batch 1 --hidden ${hidden} --layers 4
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "shard_planner --fabric ${fabric} failed (${rc}): ${err}")
    endif()
    string(REGEX MATCHALL "[^\n]+" rows "${out}")
    set(prev_tp 0)
    set(prev_us -1)
    set(prev_compute -1)
    foreach(row IN LISTS rows)
      string(REPLACE "," ";" f "${row}")
      list(GET f 0 tp)
      list(GET f 2 algo)
      list(GET f 3 us)
      list(GET f 5 compute)
      if(tp EQUAL 1 AND NOT us EQUAL 0)
        message(FATAL_ERROR "${fabric}: TP 1 predicts ${us} us of communication; it needs none")
      endif()
      if(prev_tp GREATER 0)
        if(NOT us GREATER prev_us)
          message(FATAL_ERROR "${fabric}, hidden ${hidden}: all-reduce time does not grow with TP: "
                              "TP ${prev_tp} ${prev_us} us, TP ${tp} ${us} us (${algo})")
        endif()
        if(NOT compute LESS prev_compute)
          message(FATAL_ERROR "${fabric}: compute per step does not shrink from TP ${prev_tp} to ${tp}")
        endif()
      endif()
      set(prev_tp ${tp})
      set(prev_us ${us})
      set(prev_compute ${compute})
    endforeach()
    if(NOT prev_tp EQUAL 16)
      message(FATAL_ERROR "${fabric}: the table stops at TP ${prev_tp}, expected 16:\n${out}")
    endif()
    message(STATUS "${fabric}, hidden ${hidden}: all-reduce time rises with TP up to ${prev_us} us at TP 16")
  endforeach()
endforeach()
