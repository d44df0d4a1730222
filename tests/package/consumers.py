#!/usr/bin/env python3
"""Builds and runs tests/consumer, a user's project in C, the three ways a user gets Kiln.

  consumers.py subdir SOURCE WORK     add_subdirectory of Kiln's source tree (a Release
                                      build), then installs that Kiln under WORK/install
  consumers.py package SOURCE WORK    find_package(Kiln) from WORK/install
  consumers.py pkgconfig SOURCE WORK  cc with pkg-config's flags (kiln.pc in WORK/install)

subdir runs first (ctest fixture): the install it leaves is the one the others use, so Kiln
is compiled once. The environment passes CMake's generator, compiler and make program."""
import os
import shlex
import subprocess
import sys


def run(cmd, **kw):
    print("+", " ".join(shlex.quote(str(c)) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, **kw)


def cmake_build(source, build, defines):
    gen = os.environ.get("KILN_CMAKE_GENERATOR", "Ninja")
    cc = os.environ.get("KILN_CC", "cc")
    args = ["cmake", "-S", source, "-B", build, "-G", gen, f"-DCMAKE_C_COMPILER={cc}",
            "-DCMAKE_BUILD_TYPE=Release"]
    if os.environ.get("KILN_MAKE_PROGRAM"):
        args.append(f"-DCMAKE_MAKE_PROGRAM={os.environ['KILN_MAKE_PROGRAM']}")
    run(args + [f"-D{k}={v}" for k, v in defines.items()])
    run(["cmake", "--build", build, "--parallel", os.environ.get("KILN_JOBS", "2")])


def run_programs(folder, names):
    for name in names:
        run([os.path.join(folder, name)])


def main():
    mode, source, work = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    consumer = os.path.join(source, "tests", "consumer")
    install = os.path.join(work, "install")
    programs = ["consumer", "consumer_static", "consumer_shared"]
    if mode == "subdir":
        build = os.path.join(work, "subdir")
        cmake_build(consumer, build, {"KILN_SOURCE_DIR": source,
                                      "CMAKE_INSTALL_PREFIX": install})
        run_programs(build, programs)
        run(["cmake", "--install", build])
    elif mode == "package":
        build = os.path.join(work, "package")
        cmake_build(consumer, build, {"CMAKE_PREFIX_PATH": install})
        run_programs(build, programs)
    elif mode == "pkgconfig":
        build = os.path.join(work, "pkgconfig")
        os.makedirs(build, exist_ok=True)
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(install, "lib", "pkgconfig"))

        def pc(*args):
            out = subprocess.run(["pkg-config", *args, "kiln"], check=True, env=env,
                                 capture_output=True, text=True).stdout
            return shlex.split(out)

        cc = os.environ.get("KILN_CC", "cc")
        src = os.path.join(consumer, "consumer.c")
        libdir = pc("--variable=libdir")[0]
        # Shared: the flags as they are; static: libkiln.a by name, with Libs.private.
        run([cc, "-std=c11", src, "-o", os.path.join(build, "consumer_shared"),
             *pc("--cflags", "--libs"), f"-Wl,-rpath,{libdir}"])
        static_libs = ["-l:libkiln.a" if f == "-lkiln" else f for f in pc("--static", "--libs")]
        run([cc, "-std=c11", src, "-o", os.path.join(build, "consumer_static"),
             *pc("--cflags"), *static_libs])
        run_programs(build, ["consumer_shared", "consumer_static"])
    else:
        print(f"consumers.py: unknown mode {mode}")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
