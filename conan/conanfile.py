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
    license = "BSD-3-Clause"
    # The project has no public home yet; CMakeLists.txt (project HOMEPAGE_URL)
    # carries the same placeholder. Set both to the real address.
    url = "https://example.invalid/comm"
    homepage = "https://example.invalid/comm"
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
        copy(self, "LICENSE", root, self.export_sources_folder)
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
        copy(self, "LICENSE", self.source_folder, os.path.join(self.package_folder, "licenses"))
        # Conan consumers get CMakeDeps' config files and PkgConfigDeps' .pc
        # files (same targets and name, from package_info); ours would compete.
        rmdir(self, os.path.join(self.package_folder, "lib", "cmake"))
        rmdir(self, os.path.join(self.package_folder, "lib", "pkgconfig"))

    def _libfabric_is_package(self):
        """True when libfabric is a Conan package with files, False when it is
        the system's ([platform_requires]) or not visible here (a shared comm's
        consumers do not see its private dependencies)."""
        try:
            return self.dependencies["libfabric"].package_folder is not None
        except KeyError:
            return False

    def package_info(self):
        # The targets of the plain CMake package (cmake/commConfig.cmake.in):
        # comm::comm (everything), comm::core (the library), and one
        # comm::<transport> per transport built in, each requiring comm::core.
        self.cpp_info.set_property("cmake_file_name", "comm")
        self.cpp_info.set_property("cmake_target_name", "comm::comm")
        self.cpp_info.set_property("pkg_config_name", "comm")
        static = not self.options.shared

        # libcomm, with what its transports link: a static libcomm.a hands
        # those libraries on to the consumer, after itself on the link line.
        core = self.cpp_info.components["core"]
        core.set_property("cmake_target_name", "comm::core")
        core.set_property("pkg_config_name", "comm-core")
        core.libs = ["comm"]
        core.system_libs = ["pthread", "dl"]
        if static:
            core.defines = ["COMM_STATIC_DEFINE"]
            if self.options.with_ucx:
                core.system_libs += ["ucp", "uct", "ucs"]
            if self.options.with_gloo:
                core.system_libs.append("gloo")
            if self.options.get_safe("with_mpi"):
                core.system_libs.append("mpi")
        if self.options.with_ofi:
            if self._libfabric_is_package():
                core.requires.append("libfabric::libfabric")
            else:
                # The system's libfabric ([platform_requires]): CMakeDeps has no
                # target for it (conan-io/docs#3908), so name the library itself.
                if static:
                    core.system_libs.append("fabric")
                self.cpp_info.ignored_requires = ["libfabric"]

        # One component per transport: comm with that transport. The NCCL one
        # is a plugin module, libcomm_nccl.so, beside libcomm.so where the
        # registry looks for it at run time; it links NCCL and the CUDA runtime
        # itself, so nothing more is linked into the consumer.
        built = [t for t in ("ucx", "ofi", "gloo", "mpi", "nccl") if self.options.get_safe(f"with_{t}")]
        for transport in ["local"] + built:
            component = self.cpp_info.components[transport]
            component.set_property("cmake_target_name", f"comm::{transport}")
            component.set_property("pkg_config_name", f"comm-{transport}")
            component.requires = ["core"]
