# The Debian package (CPack DEB; scripts/package.sh builds it, docs/install.md). Its maintainer
# scripts register softrnic's IAs in /etc/dat.conf on install and remove exactly the lines they
# added on removal, as OFA dapl's packages do with theirs.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME softrnic)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "softrnic engineers <softrnic@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "userspace software RNIC (iWARP, RoCEv2) with a DAT 2.0 (uDAPL) provider")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "softrnic speaks iWARP (over UDP or MPA/TCP) and RoCEv2 on NICs without RDMA offload, through kernel
 sockets or DPDK, and offers its queue pairs to DAT 2.0 consumers (dtest, dapltest, MPI over uDAPL)
 through libdat2: its IAs softrnic_iwarp, softrnic_iwarp_tcp, softrnic_roce and softrnic_loopback
 are registered in /etc/dat.conf.")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Depends from the ELF files (dpkg-shlibdeps): libdat2-2, DPDK's libraries, ISA-L, libsodium, ...
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)  # the build is RelWithDebInfo; the package carries no debug info
# DPDK loads its poll-mode drivers as plugins: the ones docs/dpdk.md uses.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "librte-net-memif23, librte-net-af-packet23, dapl2-utils")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA "${CMAKE_CURRENT_LIST_DIR}/postinst;${CMAKE_CURRENT_LIST_DIR}/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
