# admin_page_embed.cmake - turns the status page (admin_page.html) into the
# C array admin_page_html[] (admin_page.h), so cairnd serves it with
# nothing else installed. Run by the build: cmake -DIN=... -DOUT=... -P this.
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "(..)" "0x\\1," bytes "${hex}")
file(WRITE "${OUT}"
  "/* Generated from src/admin/admin_page.html by admin_page_embed.cmake: do not edit. */\n"
  "#include \"admin/admin_page.h\"\n\n"
  "const char admin_page_html[] = {${bytes}0x00};\n")
