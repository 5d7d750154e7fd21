// Tests for the line rule of the object check (object_lines.h): which source line of an object
// reaches Python, read from `objdump -d -l --inlines -r -w` text shaped as binutils 2.40 prints
// it, and the source directives that would move a line to another file. The real objects (honest
// bindings, pybind11's object API, the C API from a candidate's header) are the catalog's cases
// (tests/verify/cases/i10-c1-python-from-cpp-*, i10-c1-*line*, tests/gpu/cases/g-i10c1-python-from-cuda-host).
#include "cudaagent/candidate/object_lines.h"

#include <doctest/doctest.h>

#include "cudaagent/candidate/source_policy.h"

using cudaagent::candidate_python_use;
using cudaagent::kept_objdump_lines;
using cudaagent::python_sites_of;
using cudaagent::reaches_python;

namespace {

const std::vector<std::string> kGlue = {"/usr/include", "/usr/lib/python3/dist-packages/torch/include"};

// A candidate function with three references: pybind11's glue inlined through m.def (allowed),
// the C API on its own line, and pybind11's object API called from its line.
constexpr const char* kText =
    "a.o:     file format elf64-x86-64\n"
    "\n"
    "Sections:\n"
    "Idx Name Size VMA LMA File off Algn Flags\n"
    "  0 .text 00000396 0000000000000000 0000000000000000 00000050  2**4  CONTENTS, ALLOC, LOAD, RELOC, READONLY, CODE\n"
    "\n"
    "Disassembly of section .text:\n"
    "\n"
    "0000000000000000 <_Z8registerRN8pybind117module_E>:\n"
    "_ZN8pybind117getattrENS_6handleEPKc():\n"
    "/usr/include/pybind11/pytypes.h:880\n"
    "inlined by /usr/include/pybind11/pybind11.h:1166 (def<int (*)(int), char [4]>)\n"
    "inlined by /ws/kernels/b.cpp:8 (_Z8registerRN8pybind117module_E)\n"
    "   0:\tcall   5 <x+0x5>\t1: R_X86_64_PLT32\tPyObject_GetAttrString-0x4\n"
    "_Z8registerRN8pybind117module_E():\n"
    "/ws/kernels/b.cpp:9\n"
    "   5:\tmov    %rax,%rdi\n"
    "   8:\tcall   d <x+0xd>\t9: R_X86_64_PLT32\tPySys_GetObject-0x4\n"
    "_ZNK8pybind116detail10object_apiINS_6handleEEclILNS_19return_value_policyE1EJEEENS_6objectEDpOT0_():\n"
    "/usr/include/pybind11/cast.h:1635\n"
    "inlined by /ws/kernels/b.cpp:10 (_Z8registerRN8pybind117module_E)\n"
    "   d:\tcall   12 <x+0x12>\te: R_X86_64_PLT32\tPyObject_CallObject-0x4\n"
    "inlined by /ws/kernels/b.cpp:10 (_Z8registerRN8pybind117module_E)\n"
    "  12:\tsyscall\n";

}  // namespace

TEST_CASE("object lines: which references reach Python") {
  CHECK(reaches_python("PySys_GetObject"));
  CHECK(reaches_python("_Py_Dealloc"));
  CHECK(reaches_python("_ZN8pybind117module_6importEPKc"));
  CHECK(reaches_python("_ZNKR8pybind116handle7inc_refEv"));
  CHECK(reaches_python("_ZZN8pybind116handle15inc_ref_counterEmE7counter"));
  CHECK_FALSE(reaches_python("Pyramid"));
  CHECK_FALSE(reaches_python("_ZN2at6TensorD2Ev"));
  CHECK_FALSE(reaches_python("_ZTVN8pybind1117builtin_exceptionE"));  // a vtable: data about a type
  CHECK_FALSE(reaches_python("cudaLaunchKernel"));
  CHECK(reaches_python("THPVariable_Wrap"));
  CHECK(reaches_python("_Z18THPVariable_UnpackP7_object"));
  CHECK_FALSE(reaches_python("_Z12THE_functionv"));
}

TEST_CASE("object lines: every reference with its whole chain of inlined call sites") {
  const auto sites = python_sites_of(kText);
  REQUIRE(sites.size() == 3);
  CHECK(sites[0].target == "PyObject_GetAttrString");
  REQUIRE(sites[0].frames.size() == 3);
  CHECK(sites[0].frames[0].file == "/usr/include/pybind11/pytypes.h");
  CHECK(sites[0].frames[0].line == 880);
  CHECK(sites[0].frames[1].function == "def<int (*)(int), char [4]>");
  CHECK(sites[0].frames[2].file == "/ws/kernels/b.cpp");
  CHECK(sites[0].frames[2].line == 8);
  // Not inlined: the row's own line, no chain (the previous row's chain does not carry over).
  CHECK(sites[1].target == "PySys_GetObject");
  REQUIRE(sites[1].frames.size() == 1);
  CHECK(sites[1].frames[0].file == "/ws/kernels/b.cpp");
  CHECK(sites[1].frames[0].line == 9);
  CHECK(sites[2].frames.size() == 2);
}

TEST_CASE("object lines: glue passes, the candidate's own reach does not") {
  const auto sites = python_sites_of(kText);
  REQUIRE(sites.size() == 3);
  CHECK_FALSE(candidate_python_use(sites[0], kGlue));  // module_::def's glue
  const auto direct = candidate_python_use(sites[1], kGlue);
  REQUIRE(direct);
  CHECK(direct->find("kernels/b.cpp:9 uses PySys_GetObject") == 0);
  const auto object_api = candidate_python_use(sites[2], kGlue);
  REQUIRE(object_api);
  CHECK(object_api->find("kernels/b.cpp:10 calls pybind11::detail::object_api") == 0);
  // Without glue folders every line is the candidate's: nothing passes unseen.
  CHECK(candidate_python_use(sites[0], {}));
}

TEST_CASE("object lines: a frame without a file, or a file beside the glue, is the candidate's") {
  cudaagent::PythonSite site{"_Py_Dealloc", {{"/usr/include/python3.11/object.h", 500, "Py_DECREF"},
                                             {"", 0, "_Z1fv"}}};
  CHECK(candidate_python_use(site, kGlue));
  site.frames[1] = {"/usr/include/../../ws/kernels/a.cpp", 4, "_Z1fv"};  // normalised before matching
  CHECK(candidate_python_use(site, kGlue));
  site.frames[1] = {"/usr/includes/a.cpp", 4, "_Z1fv"};  // a sibling folder, not under the root
  CHECK(candidate_python_use(site, kGlue));
  // An object's destructor called from the candidate's line is an entry point.
  cudaagent::PythonSite dtor{"_Py_Dealloc", {{"/usr/include/python3.11/object.h", 500, "Py_DECREF"},
                                             {"/usr/include/pybind11/pytypes.h", 280, "_ZN8pybind116objectD2Ev"},
                                             {"/ws/kernels/a.cpp", 12, "_Z1fv"}}};
  CHECK_FALSE(candidate_python_use(dtor, kGlue));
  // A name objdump prints without its class counts only when its code lies in pybind11's headers.
  cudaagent::PythonSite plain{"PyTuple_New", {{"/usr/include/pybind11/pybind11.h", 1166, "def<F>"},
                                              {"/ws/kernels/a.cpp", 7, "_Z1fv"}}};
  CHECK_FALSE(candidate_python_use(plain, kGlue));
  plain.frames[0].file = "/usr/include/python3.11/tupleobject.h";
  CHECK(candidate_python_use(plain, kGlue));
  // Throwing pybind11's exceptions is reporting; setting the interpreter's error is not.
  cudaagent::PythonSite thrown{"_ZN8pybind1111value_errorC1EPKc", {{"/ws/kernels/a.cpp", 9, "_Z1fv"}}};
  CHECK_FALSE(candidate_python_use(thrown, kGlue));
  cudaagent::PythonSite set{"PyErr_SetString", {{"/usr/include/pybind11/detail/common.h", 900,
                                                 "_ZNK8pybind1111value_error9set_errorEv"},
                                                {"/ws/kernels/a.cpp", 9, "_Z1fv"}}};
  CHECK(candidate_python_use(set, kGlue));
  // A tensor's Python object from the candidate's line.
  cudaagent::PythonSite wrap{"_Z16THPVariable_WrapN2at10TensorBaseE", {{"/ws/kernels/a.cpp", 9, "_Z1fv"}}};
  CHECK(candidate_python_use(wrap, kGlue));
}

TEST_CASE("object lines: the kept text reads as the whole text does, and is smaller") {
  const std::string kept = kept_objdump_lines(kText);
  const auto whole = python_sites_of(kText);
  const auto again = python_sites_of(kept);
  REQUIRE(again.size() == whole.size());
  for (std::size_t i = 0; i < whole.size(); ++i) {
    CHECK(again[i].target == whole[i].target);
    REQUIRE(again[i].frames.size() == whole[i].frames.size());
    for (std::size_t k = 0; k < whole[i].frames.size(); ++k) {
      CHECK(again[i].frames[k].file == whole[i].frames[k].file);
      CHECK(again[i].frames[k].line == whole[i].frames[k].line);
      CHECK(again[i].frames[k].function == whole[i].frames[k].function);
    }
  }
  CHECK(kept.find("syscall") != std::string::npos);  // the system-call rule still sees it
  CHECK(kept.find("READONLY, CODE") != std::string::npos);
  CHECK(kept.find("mov    %rax,%rdi") == std::string::npos);
}

TEST_CASE("source policy: directives that move code to another file or line") {
  const auto found = cudaagent::scan_line_directives({
      {"kernels/a.cpp", "int f();\n#line 1200 \"/usr/include/pybind11/pybind11.h\"\nint g();\n"},
      {"kernels/b.cpp", "  # 7 \"/usr/include/python3.11/object.h\"\n"},
      {"kernels/c.cu", "int x;\n  %: \\\n 12 \"x.h\"\n"},
      {"kernels/d.cpp", "void f() { __asm__(\".file 9 \\\"x.h\\\"\\n\\t.loc 9 3 0\"); }\n"},
      {"kernels/e.h", "const char t[] __attribute__((section(\".debug_line\"))) = {0};\n"},
      {"kernels/f1.cu", "void f() { asm(\".l\" \"oc 1 2 3\"); }\n"},           // split across literals
      {"kernels/f2.cu", "void f() { asm(\"\\x2emacro m\\n\"); }\n"},            // escaped
      {"kernels/f3.cu", "#define CAT(a, b) a##b\nvoid f() { asm(\"nop\"); }\n"},  // pasting beside asm
      {"kernels/f4.cu", "void f() { asm(R\"x(.pushsection .text.hot)x\"); }\n"},   // a raw string
      {"kernels/art.cpp", "auto f = []() __attribute__((always_inline, artificial)) { return 1; };\n"},
      {"kernels/art2.cu", "\n[[gnu::__artificial__]] inline int g() { return 2; }\n"},
      {"kernels/data.cpp", "asm(\".section .rodata\\n.byte 1\\n.previous\");\n"},
      {"kernels/back.cpp", "void f() { asm(\".previous\\ncall g\\n.previous\"); }\n"},  // GCC's last section
      {"kernels/pop.cpp", "void f() { asm(\".popsection\"); }\n"},
      {"kernels/str.cpp", "#define S(x) #x\nvoid f() { asm(S(.previous)); }\n"},
      {"kernels/ptx.cu", "__device__ float g(const float* p) { float v;\n"
                         "  asm volatile(\"{ .reg .pred q; ld.global.nc.f32 %0, [%1]; }\" : \"=f\"(v) : \"l\"(p));\n"
                         "  return v; }\n#define STR(x) #x\n"},
      {"kernels/ok.cpp", "#include <torch/extension.h>\n# if 1\n#define LINE 3\nint file = 0; // .file 3\n"
                         "const char* s = \"#line 3\";\n/* #line 4 */\n"},
      {"kernels/notes.txt", "#line 1\n"},
  });
  std::map<std::string, std::string> by_file;
  for (const auto& f : found) by_file[f.file] += f.call + "@" + std::to_string(f.line) + " ";
  CHECK(by_file["kernels/a.cpp"] == "#line@2 ");
  CHECK(by_file["kernels/b.cpp"] == "linemarker@1 ");
  CHECK(by_file["kernels/c.cu"] == "linemarker@2 ");
  CHECK(by_file["kernels/d.cpp"] == "assembler .file@1 ");
  CHECK(by_file["kernels/e.h"] == ".debug_ section@1 ");
  CHECK(by_file["kernels/f1.cu"] == "assembler .loc (in a string)@1 ");
  CHECK(by_file["kernels/f2.cu"] == "assembler .macro (in a string)@1 ");
  CHECK(by_file["kernels/f3.cu"] == "token pasting (##) beside inline assembly@1 ");
  CHECK(by_file["kernels/f4.cu"] == "assembler .pushsection .text@1 ");
  CHECK(by_file.count("kernels/data.cpp") == 0);  // data sections stay allowed
  CHECK(by_file["kernels/art.cpp"] == "the artificial attribute@1 ");
  CHECK(by_file["kernels/art2.cu"] == "the artificial attribute@2 ");
  CHECK(by_file["kernels/back.cpp"] == "assembler .previous (in a string)@1 ");
  CHECK(by_file["kernels/pop.cpp"] == "assembler .popsection (in a string)@1 ");
  CHECK(by_file["kernels/str.cpp"] == "assembler .previous outside a string@2 ");
  CHECK(by_file.count("kernels/ptx.cu") == 0);  // PTX's own directives in device code
  CHECK(by_file.count("kernels/ok.cpp") == 0);
  CHECK(by_file.count("kernels/notes.txt") == 0);
}

TEST_CASE("source policy: a macro defined before torch's or pybind11's headers in a .cu") {
  const auto found = cudaagent::scan_macros_before_python_headers({
      // The macro rewrites the tensor caster's code in torch's header: refused.
      {"kernels/a.cu", "#define THPVariable_Wrap(t) evil(t)\n#include <torch/extension.h>\n"},
      // Through a candidate header included first.
      {"kernels/macros.h", "#pragma once\n#define BLOCK 256\n"},
      {"kernels/b.cu", "#include \"macros.h\"\n#include <cuda_runtime.h>\n# include <pybind11/pybind11.h>\n"},
      // Honest: include guards, torch first, macros after; CUDA headers after a macro are fine.
      {"kernels/guard.h", "#ifndef GUARD_H\n#define GUARD_H\n#include <torch/extension.h>\n#endif\n"},
      {"kernels/c.cu", "#include \"guard.h\"\n#include <torch/extension.h>\n#define CHECK(x) x\n#include <cuda_fp16.h>\n"},
      // A .cpp gets the precompiled torch header ahead of its first line.
      {"kernels/d.cpp", "#define X 1\n#include <torch/extension.h>\n"},
      // A computed include after its macro; an #undef; a continued directive.
      {"kernels/e.cu", "#define HEADER <cstdio>\n#include HEADER\n"},
      {"kernels/f.cu", "#undef assert\n#include \\\n  <torch/extension.h>\n"},
      // A cycle of candidate headers ends.
      {"kernels/x.h", "#include \"y.h\"\n"},
      {"kernels/y.h", "#include \"x.h\"\n"},
      {"kernels/g.cu", "#include \"x.h\"\n#include <torch/extension.h>\n"},
  });
  std::map<std::string, std::string> by_file;
  for (const auto& f : found) by_file[f.file] += std::to_string(f.line) + ":" + f.call + " | ";
  CHECK(by_file["kernels/a.cu"] == "2:#include <torch/extension.h> after the macro at kernels/a.cu:1 | ");
  CHECK(by_file["kernels/b.cu"] == "3:#include <pybind11/pybind11.h> after the macro at kernels/macros.h:2 | ");
  CHECK(by_file.count("kernels/c.cu") == 0);
  CHECK(by_file.count("kernels/d.cpp") == 0);
  CHECK(by_file["kernels/e.cu"].rfind("2:#include HEADER after the macro at kernels/e.cu:1", 0) == 0);
  CHECK(by_file["kernels/f.cu"].rfind("2:#include <torch/extension.h> after the macro at kernels/f.cu:1", 0) == 0);
  CHECK(by_file.count("kernels/g.cu") == 0);
}

TEST_CASE("source policy: a candidate may not add to pybind11's namespace") {
  const auto found = [](const std::string& code) {
    return cudaagent::scan_pybind11_namespace({{"kernels/a.cpp", code}});
  };
  CHECK(found("namespace pybind11 { namespace detail { void f(); } }\n").size() == 1);
  CHECK(found("namespace pybind11::detail {\nvoid f();\n}\n").front().line == 1);
  CHECK(found("PYBIND11_NAMESPACE_BEGIN(PYBIND11_NAMESPACE)\nPYBIND11_NAMESPACE_END(PYBIND11_NAMESPACE)\n").size() == 1);
  CHECK(found("#define NS pybind11\nnamespace NS {\n}\n").front().line == 2);
  CHECK(found("#define CAT(a, b) a##b\nnamespace CAT(pybind, 11) {\n}\n").size() == 1);
  // A comment or a string never counts; using-directives and aliases add nothing to it.
  CHECK(found("// namespace pybind11 {\nconst char* s = \"namespace pybind11 {\";\n").empty());
  CHECK(found("using namespace pybind11::literals;\nnamespace py = pybind11;\nnamespace mine {\n}\n").empty());
  CHECK(found("namespace {\nint helper() { return 1; }\n}  // namespace\n").empty());
}
