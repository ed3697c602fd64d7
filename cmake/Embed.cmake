# luastream_embed(OUT_VAR FILE...): compiles files of the source tree into the
# programs. For each FILE (a path in the source tree) the build writes
# <build>/embedded/<path>.inc, the file's bytes as a C initializer list ending
# in a 0 byte, so that a C file can hold the text as an array:
#
#   static const char text[] = {
#   #include "lua/luastream.lua.inc"
#   };                                  /* sizeof text - 1 bytes, 0-terminated */
#
# OUT_VAR gets the .inc paths: add them to the sources of the target that
# includes them, so they are made (and remade when the file changes) first.
# The include folder is LUASTREAM_EMBED_DIR.
set(LUASTREAM_EMBED_DIR ${CMAKE_BINARY_DIR}/embedded)
set(LUASTREAM_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/embed_file.cmake)

function(luastream_embed out_var)
  set(incs)
  foreach(src IN LISTS ARGN)
    get_filename_component(src ${src} ABSOLUTE)
    file(RELATIVE_PATH rel ${CMAKE_SOURCE_DIR} ${src})
    set(inc ${LUASTREAM_EMBED_DIR}/${rel}.inc)
    add_custom_command(OUTPUT ${inc}
      COMMAND ${CMAKE_COMMAND} -DIN=${src} -DOUT=${inc} -P ${LUASTREAM_EMBED_SCRIPT}
      DEPENDS ${src} ${LUASTREAM_EMBED_SCRIPT}
      COMMENT "Embedding ${rel}"
      VERBATIM)
    list(APPEND incs ${inc})
  endforeach()
  set(${out_var} ${incs} PARENT_SCOPE)
endfunction()
