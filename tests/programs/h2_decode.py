#!/usr/bin/python3
"""Decodes one direction of a recorded HTTP/2 connection with an HPACK
implementation of its own (Debian's python3-hpack and hyperframe), to check
that redaction left a stream any decoder still reads. Prints one JSON list
of [name, value] pairs per header block.  usage: h2_decode.py FILE"""
import json
import sys

import hpack
from hyperframe.frame import Frame

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
data = open(sys.argv[1], "rb").read()
if data.startswith(PREFACE):
    data = data[len(PREFACE):]
decoder = hpack.Decoder()
block = b""
while data:
    frame, length = Frame.parse_frame_header(memoryview(data[:9]))
    frame.parse_body(memoryview(data[9:9 + length]))
    data = data[9 + length:]
    if frame.type in (0x1, 0x9):  # HEADERS, CONTINUATION
        block += frame.data
        if "END_HEADERS" in frame.flags:
            print(json.dumps([[n, v] for n, v in decoder.decode(block, raw=False)]))
            block = b""
