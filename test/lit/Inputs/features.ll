; Shared input of the opt and llc tests: made from Inputs/features.c with
;   clang-22 -O2 -Xclang -disable-llvm-passes -fno-discard-value-names -S -emit-llvm
;   | opt-22 -passes='function(sroa,instcombine,simplifycfg)' -S
; then stripped of metadata and attributes. Built-in policy (threshold 20):
;   @small  3 instructions, no loop    -> "inline"
;   @sum    22 instructions, 2 loops   -> "speed"
;   @big    34 instructions, no loop   -> "size"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

define dso_local i32 @small(i32 noundef %x) {
entry:
  %mul = shl nsw i32 %x, 1
  %add = or disjoint i32 %mul, 1
  ret i32 %add
}

define dso_local i32 @sum(ptr noundef %a, i32 noundef %n) {
entry:
  br label %for.cond

for.cond:
  %s.0 = phi i32 [ 0, %entry ], [ %s.1, %for.inc7 ]
  %i.0 = phi i32 [ 0, %entry ], [ %inc8, %for.inc7 ]
  %cmp = icmp slt i32 %i.0, %n
  br i1 %cmp, label %for.cond1, label %for.end9

for.cond1:
  %s.1 = phi i32 [ %add, %for.inc ], [ %s.0, %for.cond ]
  %j.0 = phi i32 [ %inc, %for.inc ], [ 0, %for.cond ]
  %cmp2 = icmp slt i32 %j.0, %n
  br i1 %cmp2, label %for.inc, label %for.inc7

for.inc:
  %idxprom = zext nneg i32 %i.0 to i64
  %arrayidx = getelementptr inbounds nuw i32, ptr %a, i64 %idxprom
  %0 = load i32, ptr %arrayidx, align 4
  %idxprom5 = zext nneg i32 %j.0 to i64
  %arrayidx6 = getelementptr inbounds nuw i32, ptr %a, i64 %idxprom5
  %1 = load i32, ptr %arrayidx6, align 4
  %mul = mul nsw i32 %0, %1
  %add = add nsw i32 %s.1, %mul
  %inc = add nuw nsw i32 %j.0, 1
  br label %for.cond1

for.inc7:
  %inc8 = add nuw nsw i32 %i.0, 1
  br label %for.cond

for.end9:
  ret i32 %s.0
}

define dso_local i32 @big(ptr noundef %a, i32 noundef %x) {
entry:
  %call = call i32 @ext(i32 noundef %x)
  %cmp = icmp sgt i32 %x, 3
  br i1 %cmp, label %if.then, label %if.else

if.then:
  %0 = load i32, ptr %a, align 4
  %mul = mul nsw i32 %0, 7
  %add = add nsw i32 %call, %mul
  br label %if.end

if.else:
  %arrayidx1 = getelementptr inbounds nuw i8, ptr %a, i64 4
  %1 = load i32, ptr %arrayidx1, align 4
  %div.neg = sdiv i32 %1, -3
  %sub = add i32 %div.neg, %call
  br label %if.end

if.end:
  %r.0 = phi i32 [ %add, %if.then ], [ %sub, %if.else ]
  %cmp2 = icmp sgt i32 %r.0, 100
  br i1 %cmp2, label %if.then3, label %if.else7

if.then3:
  %call4 = call i32 @ext(i32 noundef %r.0)
  %arrayidx5 = getelementptr inbounds nuw i8, ptr %a, i64 8
  %2 = load i32, ptr %arrayidx5, align 4
  %add6 = add nsw i32 %call4, %2
  br label %if.end11

if.else7:
  %arrayidx8 = getelementptr inbounds nuw i8, ptr %a, i64 12
  %3 = load i32, ptr %arrayidx8, align 4
  %mul9 = mul nsw i32 %r.0, %3
  %sub10 = add nsw i32 %mul9, -5
  br label %if.end11

if.end11:
  %r.1 = phi i32 [ %add6, %if.then3 ], [ %sub10, %if.else7 ]
  %arrayidx12 = getelementptr inbounds nuw i8, ptr %a, i64 32
  store i32 %r.1, ptr %arrayidx12, align 4
  %mul13 = shl nsw i32 %r.1, 1
  %arrayidx14 = getelementptr inbounds nuw i8, ptr %a, i64 36
  store i32 %mul13, ptr %arrayidx14, align 4
  %call15 = call i32 @small(i32 noundef %r.1)
  %add16 = add nsw i32 %r.1, %call15
  ret i32 %add16
}

declare i32 @ext(i32 noundef)
