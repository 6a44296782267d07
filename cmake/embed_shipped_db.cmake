# Writes the shipped tuning databases (every DIR/*.db) into a C++ source as raw string
# literals (loom::tune::shipped_db_files()), so the defaults travel inside the binary.
file(GLOB FILES ${DIR}/*.db)
list(SORT FILES)
set(BODY "")
foreach(f ${FILES})
  get_filename_component(name ${f} NAME)
  file(READ ${f} CONTENT)
  string(APPEND BODY "      {\"${name}\", R\"LOOMDB(${CONTENT})LOOMDB\"},\n")
endforeach()
file(WRITE ${OUT} "// Generated from tune/shipped/*.db; do not edit.\n"
  "#include \"tune/shipped.h\"\n"
  "namespace loom::tune {\n"
  "const std::vector<ShippedDbFile>& shipped_db_files() {\n"
  "  static const std::vector<ShippedDbFile> files = {\n${BODY}  };\n"
  "  return files;\n}\n}  // namespace loom::tune\n")
