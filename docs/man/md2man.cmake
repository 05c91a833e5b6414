# Renders one man page: cmake -DGO_MD2MAN=... -DMD=page.N.md -DMAN=page.N -DVERSION=x.y.z -P md2man.cmake
# The source's @PROJECT_VERSION@ becomes VERSION; go-md2man (Debian 12: 2.0.2) writes .nh before
# .TH, whose macro turns hyphenation back on, so .nh is moved after .TH (identifiers such as
# SOFTRNIC_LOG or softrnic_iwarp must not be split by hyphens).
foreach(v GO_MD2MAN MD MAN VERSION)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "md2man.cmake: ${v} not given")
  endif()
endforeach()
file(READ "${MD}" text)
string(REPLACE "@PROJECT_VERSION@" "${VERSION}" text "${text}")
file(WRITE "${MAN}.md" "${text}")
execute_process(COMMAND "${GO_MD2MAN}" "-in=${MAN}.md" "-out=${MAN}.tmp"
                RESULT_VARIABLE rc ERROR_VARIABLE err)
file(REMOVE "${MAN}.md")
if(NOT rc EQUAL 0 OR NOT err STREQUAL "")
  file(REMOVE "${MAN}.tmp")
  message(FATAL_ERROR "go-md2man ${MD}: ${rc} ${err}")
endif()
file(READ "${MAN}.tmp" page)
file(REMOVE "${MAN}.tmp")
string(REGEX REPLACE "^\\.nh\n(\\.TH [^\n]*\n)" "\\1.nh\n" page "${page}")
file(WRITE "${MAN}" "${page}")
