"""Prints, as one JSON object, what a C++ build needs to compile and link a torch extension for
this interpreter. Run by lib/sandbox/torch_env.cpp in isolated mode; its answer is cached."""

import json
import os
import sys
import sysconfig


def main():
    import torch
    from torch.utils import cpp_extension

    info = {
        # Not realpath: a virtual environment's python is a symlink, and only the link's path
        # makes the interpreter find the environment's site-packages.
        "python": os.path.abspath(sys.executable),
        "prefixes": sorted({sys.prefix, sys.base_prefix, sys.exec_prefix}),
        "python_version": sysconfig.get_python_version() + "." + str(sys.version_info.micro),
        "torch_version": torch.__version__,
        "torch_cuda": torch.version.cuda or "",
        "include_paths": cpp_extension.include_paths() + [sysconfig.get_paths()["include"]],
        "library_paths": [p for p in cpp_extension.library_paths() if os.path.isdir(p)],
        "libraries": ["c10", "torch", "torch_cpu", "torch_python"],
        "extension_suffix": sysconfig.get_config_var("EXT_SUFFIX"),
        "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
        "cuda_available": False,
        "gpu_name": "",
        "gpu_arch": "",
        "gpu_memory_bytes": 0,
    }
    if torch.version.cuda:
        info["libraries"] += ["c10_cuda", "torch_cuda", "cudart"]
        cuda_home = cpp_extension.CUDA_HOME or ""
        if cuda_home:
            info["library_paths"].append(os.path.join(cuda_home, "lib64"))
        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability(0)
            info.update(cuda_available=True, gpu_name=torch.cuda.get_device_name(0),
                        gpu_arch=f"{major}{minor}",
                        gpu_memory_bytes=int(torch.cuda.get_device_properties(0).total_memory))
    print(json.dumps(info))


main()
