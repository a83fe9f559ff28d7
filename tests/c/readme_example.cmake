# Runs a code block of README.md exactly as written, so the README's examples
# cannot rot: the fenced block after the marker `<!-- readme-example: LANG`
# is written to WORK_DIR, compiled (LANG=c) and run on 2 ranks under commrun;
# the job must succeed and its output match every regex of EXPECT (separated by @@).
#
# cmake -DREADME=... -DLANG=c|python -DWORK_DIR=... -DCOMMRUN=... -DTRANSPORT=... -DEXPECT=<regex>
#       [c: -DCC=... -DCFLAGS=... -DINCLUDE_DIR=... -DLIBRARY=<libcomm>] [python: -DPYTHON=...] -P readme_example.cmake
file(READ ${README} text)
string(FIND "${text}" "<!-- readme-example: ${LANG}" at)
if(at LESS 0)
  message(FATAL_ERROR "README.md has no '<!-- readme-example: ${LANG}' marker")
endif()
string(SUBSTRING "${text}" ${at} -1 text)
string(FIND "${text}" "```${LANG}\n" open)
if(open LESS 0)
  message(FATAL_ERROR "no ```${LANG} block after the readme-example marker")
endif()
string(LENGTH "```${LANG}\n" fence)
math(EXPR open "${open} + ${fence}")
string(SUBSTRING "${text}" ${open} -1 text)
string(FIND "${text}" "\n```" close)
math(EXPR close "${close} + 1")
string(SUBSTRING "${text}" 0 ${close} code)

file(MAKE_DIRECTORY ${WORK_DIR})
if(LANG STREQUAL "c")
  set(source ${WORK_DIR}/readme_example.c)
  set(program ${WORK_DIR}/readme_example_c)
  file(WRITE ${source} "${code}")
  get_filename_component(libdir ${LIBRARY} DIRECTORY)
  separate_arguments(flags UNIX_COMMAND "${CFLAGS}")
  execute_process(COMMAND ${CC} -std=c11 -Wall -Wextra -pedantic -Werror ${flags} -I${INCLUDE_DIR} ${source} -o ${program}
                          ${LIBRARY} -Wl,-rpath,${libdir}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the README's C example does not compile:\n${out}")
  endif()
  set(command ${program})
else()
  set(source ${WORK_DIR}/readme_example.py)
  file(WRITE ${source} "${code}")
  set(command ${PYTHON} ${source})
endif()

execute_process(COMMAND ${COMMRUN} -n 2 --transport ${TRANSPORT} --timeout 60 -- ${command}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the README's ${LANG} example failed under commrun (exit ${rc})")
endif()
string(REPLACE "@@" ";" patterns "${EXPECT}")
foreach(pattern IN LISTS patterns)
  if(NOT out MATCHES "${pattern}")
    message(FATAL_ERROR "the README's ${LANG} example did not print /${pattern}/")
  endif()
endforeach()
