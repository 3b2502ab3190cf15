// The extension module deepseek_kernels._C: importing it runs the static TORCH_LIBRARY registrations of every
// op's cpu.cpp (schemas and CPU implementations). It defines no Python functions of its own.
#include <Python.h>

extern "C" {
PyObject *PyInit__C(void) {
    static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
    return PyModule_Create(&module_def);
}
}
