# Writes the device header into a C++ source as a raw string literal (loom::device_header()).
file(READ ${IN} CONTENT)
file(WRITE ${OUT} "// Generated from src/codegen/device/loom_device.cuh; do not edit.\n"
  "namespace loom { const char* device_header() { return R\"LOOMDEV(" "${CONTENT}" ")LOOMDEV\"; } }\n")
