// The app's Key Vault: the callback signing keys (CALLBACK_SIGNING_KEYS, issue 25) live here and
// reach the app as an app setting by Key Vault reference, resolved with the app's user-assigned
// identity. Access by RBAC only (no access policies): the app identity reads secrets (Key Vault
// Secrets User), the deploying user may write them (Secrets Officer), so infra/hooks/postprovision.sh
// creates the key once. No key is ever in a template, a parameter or an app setting.
param name string
param location string
param tags object
param appPrincipalId string
param userPrincipalId string = ''
@allowed(['User', 'ServicePrincipal', 'Group'])
param userPrincipalType string = 'User'

@description('The secret holding CALLBACK_SIGNING_KEYS (id:base64secret[,id:base64secret]).')
param callbackKeysSecretName string = 'callback-signing-keys'

// Built-in role definition ids, from the Azure built-in roles reference (Security).
var roles = {
  keyVaultSecretsUser: '4633458b-17de-408a-b874-0445c86b69e6'
  keyVaultSecretsOfficer: 'b86a8fe4-44ce-4948-aee5-eccb2c155cd7'
}

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    tenantId: tenant().tenantId
    sku: {
      family: 'A'
      name: 'standard'
    }
    enableRbacAuthorization: true
    enableSoftDelete: true
    softDeleteRetentionInDays: 7
    publicNetworkAccess: 'Enabled'
  }
}

// The app reads secrets of this vault only.
resource appSecretsUser 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(vault.id, appPrincipalId, roles.keyVaultSecretsUser)
  scope: vault
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.keyVaultSecretsUser)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// The deploying user writes the key (postprovision.sh) and rotates it (docs/operations.md).
resource userSecretsOfficer 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(userPrincipalId)) {
  name: guid(vault.id, userPrincipalId, roles.keyVaultSecretsOfficer)
  scope: vault
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.keyVaultSecretsOfficer)
    principalId: userPrincipalId
    principalType: userPrincipalType
  }
}

output name string = vault.name
output callbackKeysSecretName string = callbackKeysSecretName
