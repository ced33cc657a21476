# Writes OUT: a C++ file defining `const char SYMBOL[]` (in namespace
# flightrec::events) with the bytes of INPUT.
file(READ ${INPUT} text HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "\\\\x\\1" text "${text}")
file(WRITE ${OUT} "namespace flightrec::events {\nextern const char ${SYMBOL}[];\nconst char ${SYMBOL}[] = \"${text}\";\n}\n")
