#include "textflag.h"

// func int80(nr, a, b, c uintptr) int32
TEXT ·int80(SB), NOSPLIT, $0-36
	MOVQ nr+0(FP), AX
	MOVQ a+8(FP), BX
	MOVQ b+16(FP), CX
	MOVQ c+24(FP), DX
	INT $0x80
	MOVL AX, ret+32(FP)
	RET
