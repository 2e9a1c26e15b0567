# Run by `cmake --install`: writes tcpadvise.pc and install.json with the
# absolute paths of this installation (CMAKE_INSTALL_PREFIX is the prefix
# installed to, without DESTDIR). Set by the caller: TCPADVISE_VERSION,
# TCPADVISE_LIBDIR, TCPADVISE_LIBEXECDIR (as configured, relative or absolute),
# TCPADVISE_TEMPLATES, TCPADVISE_GENERATED.
foreach(dir LIBDIR LIBEXECDIR)
  if(IS_ABSOLUTE "${TCPADVISE_${dir}}")
    set(full_${dir} "${TCPADVISE_${dir}}")
  else()
    set(full_${dir} "${CMAKE_INSTALL_PREFIX}/${TCPADVISE_${dir}}")
  endif()
endforeach()
set(prefix "${CMAKE_INSTALL_PREFIX}")
set(libdir "${full_LIBDIR}")
set(libexecdir "${full_LIBEXECDIR}")
set(version "${TCPADVISE_VERSION}")
configure_file("${TCPADVISE_TEMPLATES}/tcpadvise.pc.in" "${TCPADVISE_GENERATED}/tcpadvise.pc" @ONLY)
configure_file("${TCPADVISE_TEMPLATES}/install.json.in" "${TCPADVISE_GENERATED}/install.json" @ONLY)
