import os

from conan import ConanFile
from conan.tools.build import can_run
from conan.tools.cmake import CMake, CMakeDeps, CMakeToolchain, cmake_layout


class CommTestPackage(ConanFile):
    settings = "os", "arch", "compiler", "build_type"
    generators = "VirtualRunEnv"

    def requirements(self):
        self.requires(self.tested_reference_str)

    def layout(self):
        cmake_layout(self)

    def generate(self):
        # The transports this package was built with: CMakeLists.txt links
        # each one's target, comm::<transport>, and the program checks that
        # the library has them.
        comm = self.dependencies["comm"]
        transports = ["local"] + [t for t in ("ucx", "ofi", "gloo", "mpi", "nccl") if comm.options.get_safe(f"with_{t}")]
        tc = CMakeToolchain(self)
        tc.cache_variables["COMM_TEST_TRANSPORTS"] = ",".join(transports)
        tc.cache_variables["COMM_TEST_VERSION"] = str(comm.ref.version)
        tc.generate()
        CMakeDeps(self).generate()

    def build(self):
        cmake = CMake(self)
        cmake.configure()
        cmake.build()

    def test(self):
        if can_run(self):
            self.run(os.path.join(self.cpp.build.bindir, "test_package"), env="conanrun")
