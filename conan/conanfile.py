"""Conan 2 recipe for comm, the collective-communication library.

The recipe lives in conan/ and the sources one level up; export_sources()
copies the parts of the repository the build needs.

Transports and where their libraries come from:
  local  always built in (threads of one process).
  ofi    libfabric, a ConanCenter requirement (libfabric/[>=1.12 <3]). To use
         the system's libfabric instead, map it in a profile:
             [platform_requires]
             libfabric/1.17.0
         (conan/profiles/system does this for Debian 12).
  ucx    from the system (Debian/Ubuntu: libucx-dev; RHEL/Fedora: ucx-devel).
  gloo   from the system (Debian/Ubuntu: libgloo-dev).
  mpi    from the system: an MPI with C headers and mpicc (Debian/Ubuntu:
         libopenmpi-dev; RHEL/Fedora: openmpi-devel). Launch with mpirun.
  nccl   from the system: the CUDA toolkit plus NCCL (libnccl-dev, or
         pip install nvidia-nccl-cu13). Built as a plugin module,
         libcomm_nccl.so, loaded at run time; needs shared=True.
System libraries are checked in system_requirements() (Conan's default
tools.system.package_manager:mode=check reports a missing package by name),
and CMake fails at configure time, naming the package to install, for every
with_<transport>=True whose library it cannot find.
"""

import os
import re

from conan import ConanFile
from conan.errors import ConanInvalidConfiguration
from conan.tools.build import check_min_cppstd
from conan.tools.cmake import CMake, CMakeDeps, CMakeToolchain, cmake_layout
from conan.tools.files import copy, load, rmdir
from conan.tools.gnu import PkgConfigDeps
from conan.tools.system.package_manager import Apt, Dnf, Yum

required_conan_version = ">=2.0"

# Transports whose library is not a Conan package: the system package that
# provides it per package manager, for system_requirements().
_SYSTEM_PACKAGES = {
    "ucx": {"apt": ["libucx-dev"], "yum": ["ucx-devel"]},
    "gloo": {"apt": ["libgloo-dev"], "yum": []},
    "mpi": {"apt": ["libopenmpi-dev"], "yum": ["openmpi-devel"]},
}


class CommConan(ConanFile):
    name = "comm"
    description = ("Collective communication for LLM inference runtimes: one Communicator API over "
                   "pluggable transports (local threads, UCX, libfabric, Gloo, NCCL)")
    topics = ("collectives", "allreduce", "ucx", "libfabric", "nccl", "mpi", "inference")
    package_type = "library"
    settings = "os", "arch", "compiler", "build_type"
    options = {
        "shared": [True, False],
        "fPIC": [True, False],
        "with_ucx": [True, False],
        "with_ofi": [True, False],
        "with_gloo": [True, False],
        "with_nccl": [True, False],
        "with_mpi": [True, False],
    }
    # Shared by default: the NCCL plugin and user plugins link the shared
    # libcomm. libfabric comes from ConanCenter, so ofi builds anywhere; the
    # system-only transports are opt-in.
    default_options = {
        "shared": True,
        "fPIC": True,
        "with_ucx": False,
        "with_ofi": True,
        "with_gloo": False,
        "with_nccl": False,
        "with_mpi": False,
    }

    def set_version(self):
        cmakelists = load(self, os.path.join(self.recipe_folder, "..", "CMakeLists.txt"))
        self.version = re.search(r"project\(comm VERSION ([0-9.]+)", cmakelists).group(1)

    def export_sources(self):
        root = os.path.join(self.recipe_folder, "..")
        copy(self, "CMakeLists.txt", root, self.export_sources_folder)
        for folder in ("cmake", "include", "src", "algorithms", "transports", "tools"):
            copy(self, f"{folder}/*", root, self.export_sources_folder)

    def config_options(self):
        if self.settings.os == "Windows":
            del self.options.fPIC

    def configure(self):
        if self.options.shared:
            self.options.rm_safe("fPIC")

    def layout(self):
        cmake_layout(self)

    def requirements(self):
        if self.options.with_ofi:
            self.requires("libfabric/[>=1.12 <3]")

    def validate(self):
        check_min_cppstd(self, 20)
        if self.settings.os != "Linux":
            raise ConanInvalidConfiguration(f"comm is built and tested on Linux only, not {self.settings.os}")
        if self.options.with_nccl and not self.options.shared:
            raise ConanInvalidConfiguration("comm/*:with_nccl=True needs comm/*:shared=True: the NCCL transport is a "
                                            "plugin module that links the shared libcomm")

    def system_requirements(self):
        for transport, packages in _SYSTEM_PACKAGES.items():
            if not self.options.get_safe(f"with_{transport}"):
                continue
            Apt(self).install(packages["apt"], update=False, check=True)
            if packages["yum"]:
                Yum(self).install(packages["yum"], update=False, check=True)
                Dnf(self).install(packages["yum"], update=False, check=True)

    def generate(self):
        tc = CMakeToolchain(self)
        # ON, not AUTO: a transport that was asked for and is missing must fail
        # the configure step with the package to install, not vanish.
        for transport in ("ucx", "ofi", "gloo", "nccl", "mpi"):
            tc.cache_variables[f"COMM_WITH_{transport.upper()}"] = \
                "ON" if self.options.get_safe(f"with_{transport}") else "OFF"
        tc.cache_variables["COMM_BUILD_TESTS"] = False
        tc.cache_variables["COMM_BUILD_EXAMPLES"] = False
        tc.cache_variables["COMM_BUILD_TOOLS"] = True
        tc.generate()
        CMakeDeps(self).generate()
        # Our CMake finds libfabric through pkg-config; CMakeToolchain puts the
        # generators folder on PKG_CONFIG_PATH, so a ConanCenter libfabric wins
        # over the system's, and a platform_requires one falls through to it.
        PkgConfigDeps(self).generate()

    def build(self):
        cmake = CMake(self)
        cmake.configure()
        cmake.build()

    def package(self):
        cmake = CMake(self)
        cmake.install()
        # Conan consumers get CMakeDeps' config files; ours would compete with them.
        rmdir(self, os.path.join(self.package_folder, "lib", "cmake"))

    def _libfabric_is_package(self):
        """True when libfabric is a Conan package with files, False when it is
        the system's ([platform_requires]) or not visible here (a shared comm's
        consumers do not see its private dependencies)."""
        try:
            return self.dependencies["libfabric"].package_folder is not None
        except KeyError:
            return False

    def package_info(self):
        self.cpp_info.set_property("cmake_file_name", "comm")
        self.cpp_info.set_property("cmake_target_name", "comm::comm")
        static = not self.options.shared

        # libcomm itself. It depends on the transport components below, not the
        # other way round, so that a static libcomm.a comes before the
        # transport libraries on the consumer's link line.
        core = self.cpp_info.components["core"]
        core.set_property("cmake_target_name", "comm::core")
        core.libs = ["comm"]
        core.system_libs = ["pthread", "dl"]
        if static:
            core.defines = ["COMM_STATIC_DEFINE"]

        # One component per enabled transport: the libraries that transport
        # adds to libcomm. With a shared libcomm they are private to it (empty
        # here); a static libcomm hands them on to the consumer.
        if self.options.with_ucx:
            ucx = self.cpp_info.components["ucx"]
            ucx.set_property("cmake_target_name", "comm::ucx")
            ucx.system_libs = ["ucp", "uct", "ucs"] if static else []
            core.requires.append("ucx")
        if self.options.with_ofi:
            ofi = self.cpp_info.components["ofi"]
            ofi.set_property("cmake_target_name", "comm::ofi")
            if self._libfabric_is_package():
                ofi.requires = ["libfabric::libfabric"]
            else:
                # The system's libfabric ([platform_requires]): CMakeDeps has no
                # target for it (conan-io/docs#3908), so name the library itself.
                ofi.system_libs = ["fabric"] if static else []
                self.cpp_info.ignored_requires = ["libfabric"]
            core.requires.append("ofi")
        if self.options.with_gloo:
            gloo = self.cpp_info.components["gloo"]
            gloo.set_property("cmake_target_name", "comm::gloo")
            gloo.system_libs = ["gloo"] if static else []
            core.requires.append("gloo")
        if self.options.with_mpi:
            mpi = self.cpp_info.components["mpi"]
            mpi.set_property("cmake_target_name", "comm::mpi")
            mpi.system_libs = ["mpi"] if static else []
            core.requires.append("mpi")
        if self.options.with_nccl:
            # A plugin module, libcomm_nccl.so, beside libcomm.so where the
            # registry looks for it at run time; it links NCCL and the CUDA
            # runtime itself, so nothing is linked into the consumer.
            nccl = self.cpp_info.components["nccl"]
            nccl.set_property("cmake_target_name", "comm::nccl")
            core.requires.append("nccl")
