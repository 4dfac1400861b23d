// Minimal declarations of the metal-cpp names MLX's Metal backend headers use,
// written for a syntax-only compile of quantized.cpp on Linux (tests/kernel).
// Not Apple's metal-cpp: only enough for clang -fsyntax-only to type-check.
#pragma once
#include <cstddef>
#include <cstdint>
namespace NS {
using UInteger = unsigned long;
template <typename T> struct SharedPtr { T* p = nullptr; T* get() const { return p; } T* operator->() const { return p; } explicit operator bool() const { return p; } };
template <typename T> SharedPtr<T> TransferPtr(T* p) { SharedPtr<T> s; s.p = p; return s; }
template <typename T> SharedPtr<T> RetainPtr(T* p) { SharedPtr<T> s; s.p = p; return s; }
struct Object { void release(); void retain(); };
struct String : Object { static String* string(const char*, int); const char* utf8String() const; };
enum StringEncoding { UTF8StringEncoding = 4 };
static constexpr StringEncoding UTF8StringEncoding_ = UTF8StringEncoding;
struct Error : Object { String* localizedDescription() const; };
struct AutoreleasePool : Object { static AutoreleasePool* alloc(); AutoreleasePool* init(); };
struct Array : Object {};
struct Dictionary : Object {};
}
namespace MTL {
struct Size { Size(); Size(size_t, size_t, size_t); size_t width, height, depth; };
enum DataType { DataTypeBool, DataTypeInt, DataTypeFloat, DataTypeUInt, DataTypeShort, DataTypeUShort, DataTypeHalf };
struct Resource : NS::Object {}; struct Allocation : NS::Object {};
struct Buffer : Resource { void* contents(); size_t length() const; };
struct Function : NS::Object {}; struct Library : NS::Object {}; struct LinkedFunctions : NS::Object {};
struct ComputePipelineState : NS::Object { NS::UInteger maxTotalThreadsPerThreadgroup() const; NS::UInteger threadExecutionWidth() const; };
struct Fence : NS::Object {}; struct CommandQueue : NS::Object {}; struct CommandBuffer : NS::Object {};
struct ComputeCommandEncoder : NS::Object { void setComputePipelineState(const ComputePipelineState*); void setBytes(const void*, NS::UInteger, NS::UInteger); void setThreadgroupMemoryLength(NS::UInteger, NS::UInteger); }; struct Device : NS::Object {}; struct ResidencySet : NS::Object {};
struct ResidencySets : NS::Object {}; struct FunctionConstantValues : NS::Object {};
enum ResourceUsage { ResourceUsageRead = 1, ResourceUsageWrite = 2 };
enum DispatchType { DispatchTypeSerial, DispatchTypeConcurrent };
}
